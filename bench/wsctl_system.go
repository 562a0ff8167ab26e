package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
)

// wsctlSystem runs a workload the way a host does: through a `wsctl
// batch` child process fed one JSON request per line on its stdin, each
// answered on its stdout before the next is sent, so every timed op
// includes encoding the request, the pipe both ways, the protocol's
// decoding and the response. Inputs go in run.create; a batch is one
// apply request; checkpoints and rollbacks are the checkpoint and
// rollback ops, except in a workload that checkpoints after every
// mutation (chat), whose run has automatic checkpoints: each mutation's
// request takes its checkpoint, in its transaction, as a host's run
// does by default. Positional edits (the large workload) have no batch op.
// Verify, disk and gc read the same store directory in-process, as the
// wsstore system does.
type wsctlSystem struct {
	wsstoreSystem
	bin    string
	cmd    *exec.Cmd
	in     *bufio.Writer
	pipe   io.WriteCloser
	out    *bufio.Reader
	inputs map[string]string
	begun  bool
	// auto has the run take a checkpoint after every mutation, in the
	// mutation's request; lastCP is the one the last mutation took.
	auto   bool
	lastCP string
	// profile is the CPU profile the batch process writes as it exits:
	// the one WSCTL_CPUPROFILE names, or a file of the case's own that
	// Profile removes once read.
	profile     string
	keepProfile bool
	// heapPeak is the file the batch process writes its peak heap to as
	// it exits.
	heapPeak string
}

func (s *wsctlSystem) autoCheckpoint() { s.auto = true }

// wsctlBinEnv names the wsctl binary the parent built for the cases.
const wsctlBinEnv = "WSBENCH_WSCTL"

// wsctlProfileEnv names the file a wsctl process writes its CPU profile
// to, and wsctlHeapPeakEnv the one it writes its peak heap to (cmd/wsctl).
const (
	wsctlProfileEnv  = "WSCTL_CPUPROFILE"
	wsctlHeapPeakEnv = "WSCTL_HEAPPEAK"
)

// skipCase says why workload w does not run on system s; "" when it does.
func skipCase(w, s string) string {
	if s == "wsctl" && w == "large" {
		return "positional edits have no batch op"
	}
	return ""
}

var built struct {
	once sync.Once
	bin  string
	err  error
}

// wsctlBinary is the binary the parent built (wsctlBinEnv), or, in a
// process without one (a test), one built here once.
func wsctlBinary(ctx context.Context) (string, error) {
	if bin := os.Getenv(wsctlBinEnv); bin != "" {
		return bin, nil
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "wsbench-wsctl-")
		if err != nil {
			built.err = err
			return
		}
		built.bin, built.err = buildWsctl(ctx, dir)
	})
	return built.bin, built.err
}

// buildWsctl compiles cmd/wsctl into dir (go's build cache makes it quick
// after the first time).
func buildWsctl(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "wsctl")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wsstore/wsstore/cmd/wsctl")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build wsctl: %v: %s", err, out)
	}
	return bin, nil
}

func (s *wsctlSystem) Name() string { return "wsctl" }

func (s *wsctlSystem) Setup(dir string) error {
	s.dir = filepath.Join(dir, "store")
	s.cmd = exec.CommandContext(s.ctx, s.bin, "batch", "--store", s.dir)
	s.cmd.Stderr = os.Stderr
	env := os.Environ()
	s.profile, s.keepProfile = os.Getenv(wsctlProfileEnv), true
	if s.profile == "" {
		s.profile, s.keepProfile = caseProfile(dir), false
		env = append(env, wsctlProfileEnv+"="+s.profile)
	}
	s.heapPeak = caseHeapPeak(dir)
	s.cmd.Env = append(env, wsctlHeapPeakEnv+"="+s.heapPeak)
	var err error
	if s.pipe, err = s.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.in, s.out = bufio.NewWriterSize(s.pipe, 1<<16), bufio.NewReaderSize(stdout, 1<<16)
	s.inputs = map[string]string{}
	return s.cmd.Start()
}

// response is the part of a batch response the bench reads.
type response struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// ask sends one request line and waits for its response.
func (s *wsctlSystem) ask(req map[string]any) (json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	if err := s.in.Flush(); err != nil {
		return nil, err
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("wsctl batch: %w", err)
	}
	var r response
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("wsctl batch response: %w", err)
	}
	if !r.OK {
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s", r.Error.Code, r.Error.Message)
		}
		return nil, errors.New("wsctl batch: not ok")
	}
	return r.Result, nil
}

// content sets the request's content field, base64 for bytes that are
// not UTF-8 text.
func content(req map[string]any, b []byte) map[string]any {
	if utf8.Valid(b) {
		req["content"] = string(b)
	} else {
		req["contentBase64"] = base64.StdEncoding.EncodeToString(b)
	}
	return req
}

func (s *wsctlSystem) start() error {
	if s.begun {
		return nil
	}
	s.begun = true
	_, err := s.ask(map[string]any{"op": "run.create", "runId": benchRunID,
		"chat":    runs.ChatKey{Kind: "bench", StableChatID: "bench-chat"},
		"profile": map[string]any{"autoCheckpoint": s.auto},
		"inputs":  s.inputs})
	return err
}

func (s *wsctlSystem) Apply(op Op) error {
	if op.Input {
		if s.begun || op.Src != nil || !utf8.Valid(op.Data) {
			return fmt.Errorf("wsctl: input %s must be text given before the run starts", op.Path)
		}
		s.inputs[strings.TrimPrefix(op.Path, runs.InputRoot+"/")] = string(op.Data)
		return nil
	}
	if err := s.start(); err != nil {
		return err
	}
	var res json.RawMessage
	var err error
	switch op.Kind {
	case OpWrite:
		if op.Src != nil {
			return fmt.Errorf("wsctl: %s is too large for a batch line", op.Path)
		}
		res, err = s.ask(content(map[string]any{"op": "write", "path": op.Path}, op.Data))
	case OpAppend:
		res, err = s.ask(content(map[string]any{"op": "append", "path": op.Path}, op.Data))
	case OpPatch:
		res, err = s.ask(map[string]any{"op": "patch", "path": op.Path, "old": op.Old, "new": op.New})
	case OpDelete:
		res, err = s.ask(map[string]any{"op": "delete", "path": op.Path})
	case OpBatch:
		edits := make([]map[string]any, len(op.Batch))
		for i, w := range op.Batch {
			edits[i] = content(map[string]any{"path": w.Path}, w.Data)
		}
		res, err = s.ask(map[string]any{"op": "apply", "edits": edits})
	default:
		err = fmt.Errorf("wsctl: no batch op for %s", op.Kind)
	}
	if err != nil || !s.auto {
		return err
	}
	var r struct {
		CheckpointID string `json:"checkpointId"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	s.lastCP = r.CheckpointID
	return nil
}

func (s *wsctlSystem) Checkpoint(label string) (string, error) {
	if err := s.start(); err != nil {
		return "", err
	}
	var r struct {
		CheckpointID string `json:"checkpointId"`
	}
	// A run with automatic checkpoints took this one in the mutation's
	// request; one that changed nothing needs its own.
	r.CheckpointID, s.lastCP = s.lastCP, ""
	if r.CheckpointID == "" {
		res, err := s.ask(map[string]any{"op": "checkpoint", "reason": label})
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return "", err
		}
	}
	seq, err := strconv.ParseInt(strings.TrimLeft(strings.TrimPrefix(r.CheckpointID, "cp_"), "0"), 10, 64)
	if err != nil {
		return "", fmt.Errorf("checkpoint id %q: %w", r.CheckpointID, err)
	}
	return strconv.FormatInt(seq, 10), nil
}

func (s *wsctlSystem) Rollback(id string) error {
	seq, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return err
	}
	_, err = s.ask(map[string]any{"op": "rollback", "checkpointSeq": seq})
	return err
}

// Verify opens the store read-only beside the child (SQLite's WAL lets
// both read) and reads the workspace as the wsstore system does.
func (s *wsctlSystem) Verify(want map[string][32]byte) error {
	st, err := wsstore.Open(s.ctx, s.dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
	if err != nil {
		return err
	}
	defer st.Close()
	s.st = st
	defer func() { s.st = nil }()
	return s.wsstoreSystem.Verify(want)
}

// Close ends the batch (end of input) and waits for the child to exit.
func (s *wsctlSystem) Close() error {
	if s.closed || s.cmd == nil {
		return nil
	}
	s.closed = true
	if err := s.in.Flush(); err != nil {
		return err
	}
	if err := s.pipe.Close(); err != nil {
		return err
	}
	return s.cmd.Wait()
}

// caseProfile is where the batch process of the case in dir writes its
// CPU profile when no file is asked for: beside dir, whose bytes are
// measured.
func caseProfile(dir string) string { return filepath.Clean(dir) + ".wsctl-cpu.prof" }

// caseHeapPeak is where the batch process of the case in dir writes its
// peak heap.
func caseHeapPeak(dir string) string { return filepath.Clean(dir) + ".wsctl-heap" }

// PeakHeap is the largest heap the batch process, which has exited, held:
// the bytes of its heap objects, sampled every millisecond.
func (s *wsctlSystem) PeakHeap() (int64, error) {
	if s.heapPeak == "" {
		return 0, nil
	}
	defer os.Remove(s.heapPeak)
	b, err := os.ReadFile(s.heapPeak)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// Profile splits the CPU profile of the batch process, which has exited,
// into its phases.
func (s *wsctlSystem) Profile() ([]Stage, error) {
	if s.profile == "" {
		return nil, nil
	}
	if !s.keepProfile {
		defer os.Remove(s.profile)
	}
	f, err := os.Open(s.profile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profileStages(f)
}
