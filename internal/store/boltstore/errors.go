package boltstore

import (
	"errors"
	"fmt"
	"strings"
)

// wrap gives err the package prefix and op context unless it already carries them. Sentinels
// stay reachable through errors.Is.
func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), "boltstore: ") || errors.Is(err, ErrClosed) {
		return err
	}
	if id != "" {
		return fmt.Errorf("boltstore: %s %s: %w", op, id, err)
	}
	return fmt.Errorf("boltstore: %s: %w", op, err)
}
