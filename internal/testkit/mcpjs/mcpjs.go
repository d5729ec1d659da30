// Package mcpjs runs beachd's MCP client peer — the official TypeScript
// SDK's client (@modelcontextprotocol/sdk, Streamable HTTP;
// testdata/mcp-js-client/client.mjs) — for tests. scripts/peers/mcp-js.sh
// installs the SDK. When node or the SDK is missing, Start skips the test
// with the reason, or fails it when CI is set.
package mcpjs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Client is a running client.mjs connected to one MCP server.
type Client struct {
	t      testing.TB
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr lockedBuffer
	// Server is what the server said of itself at initialization.
	Server map[string]any
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-64<<10:]
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// Dir is the directory of client.mjs (testdata/mcp-js-client at the module root).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "mcp-js-client"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Available reports why the peer cannot run ("" when it can).
func Available() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	dir, err := Dir()
	if err != nil {
		return err.Error()
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		return "@modelcontextprotocol/sdk is not installed (run scripts/peers/mcp-js.sh)"
	}
	return ""
}

// Skip skips t (or fails it under CI) when the peer cannot run.
func Skip(t testing.TB) {
	t.Helper()
	if why := Available(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("MCP TypeScript client peer unavailable under CI: %s", why)
		}
		t.Skipf("SKIPPING: MCP TypeScript client peer unavailable: %s", why)
	}
}

// Start connects a client to the MCP server at url with the bearer key; it
// is stopped when the test ends.
func Start(t testing.TB, url, key string) *Client {
	t.Helper()
	Skip(t)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{t: t, cmd: exec.Command("node", filepath.Join(dir, "client.mjs"), url, key)}
	c.cmd.Stderr = &c.stderr
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewScanner(out)
	c.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the MCP client: %v", err)
	}
	t.Cleanup(func() {
		c.in.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("MCP client stderr:\n%s", c.stderr.String())
		}
	})
	var ready struct {
		Ready  bool
		Error  string
		Server map[string]any
	}
	if err := c.read(&ready); err != nil || !ready.Ready {
		t.Fatalf("the MCP client did not connect: %v %s\n%s", err, ready.Error, c.stderr.String())
	}
	c.Server = ready.Server
	return c
}

// read decodes the next line the client prints, waiting at most 30 s.
func (c *Client) read(v any) error {
	line := make(chan error, 1)
	go func() {
		if !c.out.Scan() {
			err := c.out.Err()
			if err == nil {
				err = io.EOF
			}
			line <- err
			return
		}
		line <- nil
	}()
	select {
	case err := <-line:
		if err != nil {
			return fmt.Errorf("the MCP client stopped: %w", err)
		}
		return json.Unmarshal(c.out.Bytes(), v)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the MCP client did not answer in 30 s")
	}
}

// Answer is the client's answer to one command: Error when the SDK threw
// (a protocol error, or a result that breaks the tool's output schema).
type Answer struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

func (c *Client) do(cmd map[string]any) Answer {
	c.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to the MCP client: %v", err)
	}
	var a Answer
	if err := c.read(&a); err != nil {
		c.t.Fatalf("%s: %v\n%s", b, err, c.stderr.String())
	}
	return a
}

// Tool is a listed tool.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// ListTools lists the server's tools.
func (c *Client) ListTools() []Tool {
	c.t.Helper()
	a := c.do(map[string]any{"op": "list"})
	if !a.OK {
		c.t.Fatalf("tools/list: %s", a.Error)
	}
	var r struct{ Tools []Tool }
	if err := json.Unmarshal(a.Result, &r); err != nil {
		c.t.Fatal(err)
	}
	return r.Tools
}

// Result is a tool call's result.
type Result struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// Text is the result's text content.
func (r Result) Text() string {
	s := ""
	for _, c := range r.Content {
		s += c.Text
	}
	return s
}

// Call calls a tool; a protocol error (or a structured result the SDK
// refused) fails the test.
func (c *Client) Call(name string, args any) Result {
	c.t.Helper()
	a := c.do(map[string]any{"op": "call", "name": name, "arguments": args})
	if !a.OK {
		c.t.Fatalf("tools/call %s: %s", name, a.Error)
	}
	var r Result
	if err := json.Unmarshal(a.Result, &r); err != nil {
		c.t.Fatal(err)
	}
	return r
}

// CallInto calls a tool that must succeed and decodes its structured
// result into out.
func (c *Client) CallInto(name string, args, out any) {
	c.t.Helper()
	r := c.Call(name, args)
	if r.IsError {
		c.t.Fatalf("tools/call %s: tool error %s", name, r.Text())
	}
	if err := json.Unmarshal(r.StructuredContent, out); err != nil {
		c.t.Fatalf("tools/call %s: %v in %s", name, err, r.StructuredContent)
	}
}
