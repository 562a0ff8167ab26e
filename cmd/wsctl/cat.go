package main

import (
	"context"
	"encoding/base64"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
)

type catOptions struct {
	globals
	at string
}

func newCatCmd(a *app) *cobra.Command {
	var o catOptions
	cmd := &cobra.Command{
		Use:   "cat RUN PATH",
		Short: "Print a file of a run's workspace",
		Long: `cat writes the bytes of PATH in a run's live workspace, or at a checkpoint
with --at, to standard output unchanged. With --json it prints
{path, hash, size, content} (contentBase64 instead of content for files
that are not UTF-8 text).`,
		Args: exactArgs(2),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runCat(ctx, o, args)
		}),
	}
	cmd.Flags().StringVar(&o.at, "at", "", "read at this checkpoint instead of the live workspace")
	return cmd
}

// fileContent is a file as JSON shows it: text as content, anything else
// as contentBase64.
type fileContent struct {
	Path          string   `json:"path"`
	Hash          cas.Hash `json:"hash"`
	Size          int64    `json:"size"`
	Content       *string  `json:"content,omitempty"`
	ContentBase64 *string  `json:"contentBase64,omitempty"`
}

func newFileContent(p vfs.Path, h cas.Hash, b []byte) fileContent {
	fc := fileContent{Path: p.String(), Hash: h, Size: int64(len(b))}
	if vfs.IsText(b) {
		s := string(b)
		fc.Content = &s
	} else {
		s := base64.StdEncoding.EncodeToString(b)
		fc.ContentBase64 = &s
	}
	return fc
}

func runCat(ctx context.Context, o catOptions, args []string) error {
	at, err := parseAt(o.at)
	if err != nil {
		return err
	}
	p, err := vfs.ParsePath(args[1])
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := workspaceFor(st.Runs, args[0], at).Read(ctx, p, vfs.ReadOptions{})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, newFileContent(p, res.Info.Hash, res.Content))
	}
	_, err = o.out.Write(res.Content)
	return err
}
