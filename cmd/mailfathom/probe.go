package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probe is a health check for images that carry no curl: it exits 0 when
// the URL answers 200 OK within five seconds.
func probe(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: mailfathom probe URL")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		fmt.Fprintf(stderr, "probe: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "probe: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "probe: %s answered %s\n", args[0], resp.Status)
		return 1
	}
	return 0
}
