// Command beachd-healthcheck asks a beachd on this host whether it is alive:
// it GETs /healthz and exits 0 on 200, 1 otherwise. It exists for container
// images without a shell or curl (the distroless image of the Dockerfile),
// whose HEALTHCHECK runs it.
//
//	beachd-healthcheck [URL]    default $BEACHD_HEALTHCHECK_URL, else http://127.0.0.1:8025/healthz
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// defaultURL is beachd's /healthz on its default listen address.
const defaultURL = "http://127.0.0.1:8025/healthz"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stderr))
}

// run checks the URL named by args, the environment or the default, and
// returns the exit code: 0 healthy, 1 not, 2 usage.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	url := getenv("BEACHD_HEALTHCHECK_URL")
	switch len(args) {
	case 0:
	case 1:
		url = args[0]
	default:
		fmt.Fprintln(stderr, "usage: beachd-healthcheck [URL]")
		return 2
	}
	if url == "" {
		url = defaultURL
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "beachd-healthcheck: %v\n", err)
		return 2
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "beachd-healthcheck: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "beachd-healthcheck: %s answered %s\n", url, res.Status)
		return 1
	}
	return 0
}
