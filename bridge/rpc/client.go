package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Client is a Go client of the protocol: it sends requests and
// notifications, matches responses to requests, and hands every
// notification and server request to its handler, in order.
type Client struct {
	w      io.WriteCloser
	wmu    sync.Mutex
	mu     sync.Mutex
	nextID int64
	waits  map[string]chan *Message
	done   chan struct{}
	err    error
}

// ErrClientClosed is returned by calls on a client whose connection ended.
var ErrClientClosed = errors.New("rpc: connection closed")

// NewClient reads the server's messages from r and writes to w. handle
// receives each notification and server request on the reading goroutine,
// and the responses no call waits for (id null: a line the server could
// not read);
// it must not block for long (answer server requests from another
// goroutine with Respond).
func NewClient(r io.Reader, w io.WriteCloser, handle func(*Message)) *Client {
	c := &Client{w: w, waits: map[string]chan *Message{}, done: make(chan struct{})}
	go c.read(r, handle)
	return c
}

// Connect serves one connection of s in this process and returns its
// client (see NewClient); Serve's result arrives on the channel when the
// connection ends (Close, or ctx cancelled).
func (s *Server) Connect(ctx context.Context, handle func(*Message)) (*Client, <-chan error) {
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	done := make(chan error, 1)
	go func() {
		err := s.Serve(ctx, sr, sw)
		sw.Close()
		sr.Close()
		done <- err
	}()
	return NewClient(cr, cw, handle), done
}

func (c *Client) read(r io.Reader, handle func(*Message)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(br, 1<<30)
		if len(line) > 0 {
			var m Message
			if json.Unmarshal(line, &m) == nil {
				if m.Method == "" {
					c.mu.Lock()
					ch := c.waits[string(m.ID)]
					delete(c.waits, string(m.ID))
					c.mu.Unlock()
					if ch != nil {
						ch <- &m
						continue
					}
				}
				if handle != nil {
					handle(&m)
				}
			}
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrClientClosed, err)
	c.mu.Unlock()
	close(c.done)
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) write(m *Message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// Call sends method with params and decodes the result into result (when
// not nil). An error response is returned as an *Error. When ctx ends
// first, Call sends $/cancelRequest and returns ctx's error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	ch := make(chan *Message, 1)
	c.waits[id] = ch
	c.mu.Unlock()
	if err := c.write(&Message{ID: json.RawMessage(id), Method: method, Params: p}); err != nil {
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waits, id)
		c.mu.Unlock()
		c.Notify(MethodCancelRequest, CancelParams{ID: json.RawMessage(id)})
		return ctx.Err()
	}
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.write(&Message{Method: method, Params: p})
}

// Respond answers the server request with id: result, or rerr when set.
func (c *Client) Respond(id json.RawMessage, result any, rerr *Error) error {
	m := &Message{ID: id, Error: rerr}
	if rerr == nil {
		r, err := json.Marshal(result)
		if err != nil {
			return err
		}
		m.Result = r
	}
	return c.write(m)
}

// Close closes the client's end: the server stops and removes everything
// the connection started.
func (c *Client) Close() error { return c.w.Close() }
