package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/dag"
)

var _ PipelineStore = (*actors.Node)(nil)

// PipelineStore stores validated pipeline definitions. *actors.Node implements it.
type PipelineStore interface {
	// PutPipeline validates and stores a YAML or JSON pipeline document.
	PutPipeline(ctx context.Context, src []byte) (*dag.Pipeline, error)
}

// pipelineExts are the file extensions LoadPipelines reads.
var pipelineExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// LoadPipelines validates and stores every *.yaml, *.yml and *.json file of dir (not
// recursive), in name order, and returns the stored pipeline keys in that order. Each file
// must stay within lim, as a PUT over HTTP must.
//
// It stops at the first bad file: an unreadable file or one the validator rejects returns an
// error wrapping ErrBadPipeline that names the file and the validator's reason. A missing
// or unreadable dir also wraps ErrBadPipeline. Other store errors are returned wrapped.
func LoadPipelines(ctx context.Context, ps PipelineStore, dir string, lim dag.Limits) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read pipelines dir: %v", ErrBadPipeline, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !pipelineExts[strings.ToLower(filepath.Ext(e.Name()))] {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	keys := make([]string, 0, len(names))
	for _, name := range names {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return keys, fmt.Errorf("%w: %s: %v", ErrBadPipeline, path, err)
		}
		if err := checkLimits(src, lim); err != nil {
			return keys, fmt.Errorf("%w: %s: %v", ErrBadPipeline, path, err)
		}
		p, err := ps.PutPipeline(ctx, src)
		if errors.Is(err, dag.ErrInvalid) {
			return keys, fmt.Errorf("%w: %s: %v", ErrBadPipeline, path, err)
		}
		if err != nil {
			return keys, fmt.Errorf("server: store pipeline %s: %w", path, err)
		}
		keys = append(keys, p.Key)
	}
	return keys, nil
}

// checkLimits checks a pipeline document against lim before it is validated.
func checkLimits(src []byte, lim dag.Limits) error {
	if err := lim.CheckDocument(src); err != nil {
		return err
	}
	p, err := dag.Parse(src)
	if err != nil {
		return err
	}
	return lim.Check(p)
}
