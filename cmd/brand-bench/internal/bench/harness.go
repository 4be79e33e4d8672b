package bench

import (
	"fmt"
	"io"
	"reflect"
	"time"
)

// Every benchmark but the first (Run, whose Config is grouped by subject)
// has one shape: a configuration of its own figures beside a Harness,
// zero figures filled from its Default…Config (fillZero), a run that
// opens its report with a Header, and a report that writes itself as
// text and JSON (and, for some, a chart). brand-bench's commands hold the
// other half of the shape: flags, directories, the bound on the run, the
// files written. A new benchmark writes only its figures, its run and
// its report.

// Harness is the part of a benchmark's configuration that is not its
// figures: the gateway measured, where the run works, and what it
// records. Every benchmark that starts a gateway embeds it.
type Harness struct {
	// GatewayBinary is the brand binary whose serve command is measured.
	// Required.
	GatewayBinary string
	// WorkDir holds the store's data, the generated datasets and the
	// processes' logs. Required.
	WorkDir string `json:"-"`
	// Command is the command line recorded in the report.
	Command string `json:"-"`
	// Log receives progress lines; nil discards them.
	Log io.Writer `json:"-"`
}

// Base lets code that holds any benchmark's configuration (brand-bench's
// commands) reach the part every one has.
func (h *Harness) Base() *Harness { return h }

// check gives Log its default and fails where no benchmark can run:
// without the binary it measures or a directory to work in.
func (h *Harness) check() error {
	if h.Log == nil {
		h.Log = io.Discard
	}
	switch {
	case h.GatewayBinary == "":
		return fmt.Errorf("%w: no gateway binary", ErrConfig)
	case h.WorkDir == "":
		return fmt.Errorf("%w: no work directory", ErrConfig)
	}
	return nil
}

// fillZero sets every zero field of the struct cfg points to, in embedded
// and nested structs too, to the same field of def: "zero fields take
// the default's values", true of every field by construction rather than
// by a list kept beside the struct. A nil list is zero; an empty one is
// not. A field
// tagged `zero:"kept"` is left as it is: its zero is a value of its own
// (core 0, no warm epochs).
func fillZero[C any](cfg *C, def C) {
	fillValue(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(def))
}

func fillValue(v, def reflect.Value) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case !sf.IsExported() || sf.Tag.Get("zero") == "kept":
		case f.Kind() == reflect.Struct:
			fillValue(f, def.Field(i))
		case f.IsZero():
			f.Set(def.Field(i))
		}
	}
}

// checkFractions fails on a cache fraction outside (0, 1].
func checkFractions(fractions ...float64) error {
	for _, f := range fractions {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: cache fraction %v; (0, 1]", ErrConfig, f)
		}
	}
	return nil
}

// Header opens every benchmark's report: when it ran, how it was asked
// for, and on what.
type Header struct {
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`
}

// newHeader is the header of a run started at started.
func newHeader(started time.Time, command string) Header {
	return Header{Date: started.UTC().Truncate(time.Second), Command: command, Machine: machineInfo()}
}
