package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiFlags are the flags of commands that talk to a running beachd.
type apiFlags struct {
	URL    string `name:"url" default:"http://127.0.0.1:8025" help:"Base URL of the running beachd."`
	APIKey string `name:"api-key" env:"BEACHD_API_KEY" help:"API key (or set BEACHD_API_KEY)."`
}

// call sends a JSON request to the running daemon and decodes the answer
// into out. A non-2xx answer becomes an error carrying the server's message
// and its problems.
func (f apiFlags) call(method, path string, body any, out any) error {
	return f.callWith(method, path, body, out, nil)
}

// callWith is call with extra request headers.
func (f apiFlags) callWith(method, path string, body any, out any, headers map[string]string) error {
	if f.APIKey == "" {
		return &exitError{code: 2, err: fmt.Errorf("no API key: pass --api-key or set BEACHD_API_KEY")}
	}
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			rd = bytes.NewReader(b)
		default:
			buf, err := json.Marshal(body)
			if err != nil {
				return err
			}
			rd = bytes.NewReader(buf)
		}
	}
	req, err := http.NewRequest(method, strings.TrimRight(f.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.APIKey)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("is beachd running at %s? %w", f.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error    string `json:"error"`
			Problems []struct {
				Path, Reason string
			} `json:"problems"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg := fmt.Sprintf("%s (HTTP %d)", e.Error, resp.StatusCode)
			for _, p := range e.Problems {
				if p.Path != "" {
					msg += "\n  " + p.Path + ": " + p.Reason
				} else {
					msg += "\n  " + p.Reason
				}
			}
			return fmt.Errorf("%s", msg)
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = data
			return nil
		}
		return json.Unmarshal(data, out)
	}
	return nil
}

// printJSON pretty-prints raw JSON.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}
