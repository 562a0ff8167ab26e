package main

import (
	"errors"
	"strconv"

	"github.com/spf13/pflag"
)

// Integer flags are read in base 10 only. pflag's own read C's prefixes,
// so --max-store-bytes 010 was 8 and 0x10 was 16, where the same number
// given to "policy --set" or a batch field is decimal.

type intFlag struct{ p *int }

func (f intFlag) String() string { return strconv.Itoa(*f.p) }
func (f intFlag) Type() string   { return "int" }
func (f intFlag) Set(s string) error {
	n, err := parseDecimal(s, strconv.IntSize)
	*f.p = int(n)
	return err
}

type int64Flag struct{ p *int64 }

func (f int64Flag) String() string { return strconv.FormatInt(*f.p, 10) }
func (f int64Flag) Type() string   { return "int64" }
func (f int64Flag) Set(s string) (err error) {
	*f.p, err = parseDecimal(s, 64)
	return err
}

// parseDecimal reads a whole number written in base 10.
func parseDecimal(s string, bits int) (int64, error) {
	n, err := strconv.ParseInt(s, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("out of range")
	}
	if err != nil {
		return 0, errors.New("not a whole number in decimal digits")
	}
	return n, nil
}

// intVar and int64Var define decimal integer flags, as pflag's IntVar and
// Int64Var do.
func intVar(fs *pflag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var(intFlag{p}, name, usage)
}

func int64Var(fs *pflag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var(int64Flag{p}, name, usage)
}
