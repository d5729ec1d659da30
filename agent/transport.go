package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cool-ai/beachd/channels/fetch"
)

// Protocol generations and bindings.
const (
	V10 = "1.0"
	V03 = "0.3"

	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
)

// binding is one way of talking to an agent: a generation over a protocol
// binding at a URL.
type binding interface {
	send(ctx context.Context, m *Message, immediate bool, push *pushConfig) (*Message, *Task, error)
	getTask(ctx context.Context, id string) (*Task, error)
}

// pushConfig is the push notification configuration a request carries:
// where to post the task's updates, and the token to post with them.
type pushConfig struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// caller does the HTTP of every binding of one target.
type caller struct {
	hc       *http.Client
	headers  map[string]string
	maxBytes int64
}

// do sends one request and reads at most maxBytes of the answer.
func (c *caller) do(ctx context.Context, method, u string, body []byte, hdr map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if fetch.IsRedirect(resp.StatusCode) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return resp.StatusCode, nil, &RedirectError{Status: resp.StatusCode, To: fetch.RedirectTarget(resp)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read answer: %w", err)
	}
	if int64(len(b)) > c.maxBytes {
		return resp.StatusCode, nil, fmt.Errorf("answer larger than %d bytes", c.maxBytes)
	}
	return resp.StatusCode, b, nil
}

// rpcResponse is a JSON-RPC 2.0 response envelope.
type rpcResponse struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Result  jsontext.Value `json:"result"`
	Error   *struct {
		Code    *int           `json:"code"`
		Message string         `json:"message"`
		Data    jsontext.Value `json:"data"`
	} `json:"error"`
}

// DecodeRPCResponse checks a JSON-RPC 2.0 response to the request with id
// and returns its result, or the agent's error as an *Error.
func DecodeRPCResponse(b []byte, id, generation string) (jsontext.Value, error) {
	var r rpcResponse
	if err := unmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("decode JSON-RPC response: %w", err)
	}
	if r.JSONRPC != "2.0" {
		return nil, fmt.Errorf("decode JSON-RPC response: jsonrpc is %q, want 2.0", clip(r.JSONRPC))
	}
	if (r.Result != nil) == (r.Error != nil) {
		return nil, errors.New("decode JSON-RPC response: need exactly one of result, error")
	}
	if r.Error != nil {
		// A parse error may come back with a null id.
		if r.Error.Code == nil {
			return nil, errors.New("decode JSON-RPC response: error without code")
		}
		if !sameID(r.ID, id) && r.ID.Kind() != 'n' {
			return nil, fmt.Errorf("decode JSON-RPC response: id %s does not match the request", clip(string(r.ID)))
		}
		return nil, &Error{Generation: generation, Code: *r.Error.Code, Message: clip(r.Error.Message),
			Reason: errorInfoReason(r.Error.Data)}
	}
	if !sameID(r.ID, id) {
		return nil, fmt.Errorf("decode JSON-RPC response: id %s does not match the request", clip(string(r.ID)))
	}
	return r.Result, nil
}

func sameID(v jsontext.Value, id string) bool {
	var s string
	return v.Kind() == '"' && jsonv2.Unmarshal(v, &s) == nil && s == id
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rpc calls one JSON-RPC method.
func (c *caller) rpc(ctx context.Context, u, generation, method string, params any) (jsontext.Value, error) {
	id := newID()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	hdr := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}
	if generation == V10 {
		hdr["A2A-Version"] = V10
	}
	status, b, err := c.do(ctx, http.MethodPost, u, body, hdr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	res, err := DecodeRPCResponse(b, id, generation)
	var ae *Error
	if errors.As(err, &ae) {
		ae.Status = status
		return nil, fmt.Errorf("%s: %w", method, ae)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: %w", method, &Error{Generation: generation, Status: status})
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return res, nil
}

// rpc10 is A2A 1.0 over JSON-RPC.
type rpc10 struct {
	c      *caller
	url    string
	tenant string
}

func (r rpc10) send(ctx context.Context, m *Message, immediate bool, push *pushConfig) (*Message, *Task, error) {
	params := map[string]any{"message": m}
	if cfg := configuration10(immediate, push); cfg != nil {
		params["configuration"] = cfg
	}
	if r.tenant != "" {
		params["tenant"] = r.tenant
	}
	res, err := r.c.rpc(ctx, r.url, V10, "SendMessage", params)
	if err != nil {
		return nil, nil, err
	}
	return DecodeSendResult(res)
}

// configuration10 is A2A 1.0's SendMessageConfiguration: returnImmediately,
// and taskPushNotificationConfig {url, token}.
func configuration10(immediate bool, push *pushConfig) map[string]any {
	cfg := map[string]any{}
	if immediate {
		cfg["returnImmediately"] = true
	}
	if push != nil {
		cfg["taskPushNotificationConfig"] = push
	}
	if len(cfg) == 0 {
		return nil
	}
	return cfg
}

func (r rpc10) getTask(ctx context.Context, id string) (*Task, error) {
	params := map[string]any{"id": id}
	if r.tenant != "" {
		params["tenant"] = r.tenant
	}
	res, err := r.c.rpc(ctx, r.url, V10, "GetTask", params)
	if err != nil {
		return nil, err
	}
	return DecodeTask(res)
}

// rpc03 is A2A 0.3 over JSON-RPC.
type rpc03 struct {
	c   *caller
	url string
}

func (r rpc03) send(ctx context.Context, m *Message, immediate bool, push *pushConfig) (*Message, *Task, error) {
	params := map[string]any{"message": toMessage03(m)}
	cfg := map[string]any{}
	if immediate {
		cfg["blocking"] = false
	}
	if push != nil {
		// 0.3 MessageSendConfiguration.pushNotificationConfig.
		cfg["pushNotificationConfig"] = push
	}
	if len(cfg) > 0 {
		params["configuration"] = cfg
	}
	res, err := r.c.rpc(ctx, r.url, V03, "message/send", params)
	if err != nil {
		return nil, nil, err
	}
	return DecodeSendResult03(res)
}

func (r rpc03) getTask(ctx context.Context, id string) (*Task, error) {
	res, err := r.c.rpc(ctx, r.url, V03, "tasks/get", map[string]any{"id": id})
	if err != nil {
		return nil, err
	}
	return DecodeTask03(res)
}

// rest10 is A2A 1.0 over HTTP+JSON: POST {url}/message:send and
// GET {url}/tasks/{id}, with {url}/{tenant}/… when the card names a tenant.
type rest10 struct {
	c      *caller
	url    string
	tenant string
}

func (r rest10) path(p string) string {
	base := strings.TrimSuffix(r.url, "/")
	if r.tenant != "" {
		base += "/" + url.PathEscape(r.tenant)
	}
	return base + p
}

var restHeaders = map[string]string{"Content-Type": "application/a2a+json",
	"Accept": "application/a2a+json, application/json", "A2A-Version": V10}

func (r rest10) call(ctx context.Context, what, method, u string, body []byte) ([]byte, error) {
	status, b, err := r.c.do(ctx, method, u, body, restHeaders)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if status < 200 || status > 299 {
		return nil, fmt.Errorf("%s: %w", what, DecodeRESTError(status, b))
	}
	return b, nil
}

func (r rest10) send(ctx context.Context, m *Message, immediate bool, push *pushConfig) (*Message, *Task, error) {
	req := map[string]any{"message": m}
	if cfg := configuration10(immediate, push); cfg != nil {
		req["configuration"] = cfg
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode message: %w", err)
	}
	b, err := r.call(ctx, "message:send", http.MethodPost, r.path("/message:send"), body)
	if err != nil {
		return nil, nil, err
	}
	return DecodeSendResult(b)
}

func (r rest10) getTask(ctx context.Context, id string) (*Task, error) {
	b, err := r.call(ctx, "get task", http.MethodGet, r.path("/tasks/"+url.PathEscape(id)), nil)
	if err != nil {
		return nil, err
	}
	return DecodeTask(b)
}
