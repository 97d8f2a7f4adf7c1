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
// It stops at the first bad file: an unreadable file, one the validator rejects, or a second
// file of a key returns an error wrapping ErrBadPipeline that names the file and the reason
// (those found before anything is stored store nothing). A missing
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
	type doc struct {
		path string
		src  []byte
	}
	docs := make([]doc, 0, len(names))
	byKey := make(map[string]string, len(names)) // key -> the file that defines it
	for _, name := range names {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadPipeline, path, err)
		}
		key, err := checkLimits(src, lim)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadPipeline, path, err)
		}
		if first, ok := byKey[key]; ok {
			return nil, fmt.Errorf("%w: %s: key %q is defined by %s too (one file per key)", ErrBadPipeline, path, key, first)
		}
		byKey[key] = path
		docs = append(docs, doc{path, src})
	}
	keys := make([]string, 0, len(docs))
	for _, d := range docs {
		p, err := ps.PutPipeline(ctx, d.src)
		if errors.Is(err, dag.ErrInvalid) {
			return keys, fmt.Errorf("%w: %s: %v", ErrBadPipeline, d.path, err)
		}
		if err != nil {
			return keys, fmt.Errorf("server: store pipeline %s: %w", d.path, err)
		}
		keys = append(keys, p.Key)
	}
	return keys, nil
}

// checkLimits checks a pipeline document against lim before it is validated and returns its
// key.
func checkLimits(src []byte, lim dag.Limits) (string, error) {
	if err := lim.CheckDocument(src); err != nil {
		return "", err
	}
	p, err := dag.Parse(src)
	if err != nil {
		return "", err
	}
	return p.Key, lim.Check(p)
}
