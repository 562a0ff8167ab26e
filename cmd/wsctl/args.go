package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// allDepth is a List depth that reaches every level of any real tree.
const allDepth = 1 << 30

// exactArgs is cobra.ExactArgs with the usage line in the message.
func exactArgs(n int) cobra.PositionalArgs {
	return rangeArgs(n, n)
}

// rangeArgs is cobra.RangeArgs with the usage line in the message.
func rangeArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageError{fmt.Errorf("usage: %s", cmd.UseLine())}
		}
		return nil
	}
}
