// Package rpctest is a test client of the gatebridge JSON-RPC protocol
// (package rpc): it sends requests, waits for their responses, and hands
// out notifications and server requests in order, checking on the way that
// each process's output comes in sequence and never after its exit.
package rpctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
)

// Client is one connection's client end.
type Client struct {
	*rpc.Client
	t     testing.TB
	w     io.WriteCloser
	notes chan *rpc.Message // notifications, server requests and stray responses, in order
	seqs  map[string]int64  // last process/output seq by process; -1 after process/exited
	// backlog holds messages Next passed over (the test goroutine's own).
	backlog []*rpc.Message
}

// New reads the server's messages from r and writes the client's to w.
func New(t testing.TB, r io.Reader, w io.WriteCloser) *Client {
	c := &Client{t: t, w: w, notes: make(chan *rpc.Message, 100000), seqs: map[string]int64{}}
	c.Client = rpc.NewClient(r, w, func(m *rpc.Message) {
		c.checkOrder(m)
		c.notes <- m
	})
	go func() {
		<-c.Client.Done()
		close(c.notes)
	}()
	return c
}

// Initialize sends initialize and the initialized notification.
func (c *Client) Initialize() {
	c.t.Helper()
	c.Call(rpc.MethodInitialize, rpc.InitializeParams{ClientName: "rpctest", ProtocolVersion: 1}, nil)
	c.Notify(rpc.MethodInitialized, struct{}{})
}

// checkOrder fails the test when a process's output skips or repeats a
// seq, or comes after its process/exited.
func (c *Client) checkOrder(m *rpc.Message) {
	var p struct {
		ProcessID string `json:"processId"`
		Seq       int64  `json:"seq"`
	}
	json.Unmarshal(m.Params, &p)
	switch m.Method {
	case rpc.MethodProcessOutput:
		if last := c.seqs[p.ProcessID]; last < 0 || p.Seq != last+1 {
			c.t.Errorf("process %s: output seq %d after %d (-1: after process/exited)", p.ProcessID, p.Seq, last)
		}
		c.seqs[p.ProcessID] = p.Seq
	case rpc.MethodProcessExited:
		c.seqs[p.ProcessID] = -1
	}
}

// WriteLine sends b and a newline as is.
func (c *Client) WriteLine(b []byte) {
	c.t.Helper()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to the server: %v", err)
	}
}

// Request sends method and returns its response (Result or Error set).
func (c *Client) Request(method string, params any) *rpc.Message {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var raw json.RawMessage
	err := c.Client.Call(ctx, method, params, &raw)
	var e *rpc.Error
	switch {
	case errors.As(err, &e):
		return &rpc.Message{Error: e}
	case err != nil:
		c.t.Fatalf("%s: %v", method, err)
	}
	return &rpc.Message{Result: raw}
}

// Call sends method and decodes its result into out (when not nil); an
// error response fails the test.
func (c *Client) Call(method string, params, out any) {
	c.t.Helper()
	m := c.Request(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: error %d: %s (data %v)", method, m.Error.Code, m.Error.Message, m.Error.Data)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			c.t.Fatalf("%s: result %s: %v", method, m.Result, err)
		}
	}
}

// CallErr sends method and returns its error (nil when it succeeded).
func (c *Client) CallErr(method string, params any) *rpc.Error {
	c.t.Helper()
	return c.Request(method, params).Error
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) {
	c.t.Helper()
	if err := c.Client.Notify(method, params); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// Respond answers the server request m with result, or with rerr.
func (c *Client) Respond(m *rpc.Message, result any, rerr *rpc.Error) {
	c.t.Helper()
	if err := c.Client.Respond(m.ID, result, rerr); err != nil {
		c.t.Fatalf("respond: %v", err)
	}
}

// Next returns the first notification or server request for which keep
// returns true, or fails the test after d. The others stay queued, in
// order, for later calls.
func (c *Client) Next(d time.Duration, keep func(*rpc.Message) bool) *rpc.Message {
	c.t.Helper()
	for i, m := range c.backlog {
		if keep(m) {
			c.backlog = append(c.backlog[:i:i], c.backlog[i+1:]...)
			return m
		}
	}
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-c.notes:
			if !ok {
				c.t.Fatalf("the connection closed while waiting")
			}
			if keep(m) {
				return m
			}
			c.backlog = append(c.backlog, m)
		case <-deadline:
			c.t.Fatalf("nothing matching within %v", d)
			return nil
		}
	}
}

// IsMethod matches messages of method.
func IsMethod(method string) func(*rpc.Message) bool {
	return func(m *rpc.Message) bool { return m.Method == method }
}

// Output is what one process printed, and its exit.
type Output struct {
	Stdout, Stderr []byte
	Exited         rpc.ProcessExitedParams
	Chunks         int
}

// Collect gathers processID's output until its process/exited. answer,
// when set, answers the gate/call requests that come meanwhile.
func (c *Client) Collect(processID string, d time.Duration, answer func(rpc.GateCallParams) rpc.GateCallResult) Output {
	c.t.Helper()
	var o Output
	for {
		m := c.Next(d, func(m *rpc.Message) bool {
			if m.Method == rpc.MethodGateCall {
				return answer != nil
			}
			var p struct {
				ProcessID string `json:"processId"`
			}
			json.Unmarshal(m.Params, &p)
			return p.ProcessID == processID && (m.Method == rpc.MethodProcessOutput || m.Method == rpc.MethodProcessExited)
		})
		switch m.Method {
		case rpc.MethodGateCall:
			var p rpc.GateCallParams
			json.Unmarshal(m.Params, &p)
			c.Respond(m, answer(p), nil)
		case rpc.MethodProcessExited:
			json.Unmarshal(m.Params, &o.Exited)
			return o
		default:
			var p rpc.ProcessOutputParams
			json.Unmarshal(m.Params, &p)
			o.Chunks++
			if p.Stream == "stdout" {
				o.Stdout = append(o.Stdout, p.Chunk...)
			} else {
				o.Stderr = append(o.Stderr, p.Chunk...)
			}
		}
	}
}

// Run starts argv in sandboxID as processID and collects its output.
func (c *Client) Run(sandboxID, processID string, answer func(rpc.GateCallParams) rpc.GateCallResult, argv ...string) Output {
	c.t.Helper()
	c.Call(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: processID, SandboxID: sandboxID, Argv: argv}, nil)
	return c.Collect(processID, 90*time.Second, answer)
}

// Refused reads what a refused client gets on nc within d: one error
// response, then the end of the connection. Anything else fails the test.
func Refused(t testing.TB, nc net.Conn, d time.Duration) *rpc.Message {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	br := bufio.NewReader(nc)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("no error response: %v (read %q)", err, line)
	}
	var m rpc.Message
	if err := json.Unmarshal(line, &m); err != nil || m.Error == nil {
		t.Fatalf("not an error response: %q", line)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Fatalf("after the error: %q, %v; want the connection closed", rest, err)
	}
	return &m
}
