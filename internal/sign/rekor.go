package sign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// rekorClient uploads entries to a Rekor log (API v1).
type rekorClient struct {
	url     string
	http    *http.Client
	retries int           // after a network error, 429 or 5xx
	backoff time.Duration // doubled at each retry
}

// hashedrekord is the proposed entry for a signature of a payload by a
// certificate's key.
func hashedrekord(pl, sig, certPEM []byte) any {
	return map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]string{"algorithm": "sha256", "value": sha256Hex(pl)}},
		"signature": map[string]any{"content": sig, "publicKey": map[string]any{"content": certPEM}},
	}}
}

// dsseEntry is the proposed entry for a DSSE envelope signed by a
// certificate's key.
func dsseEntry(envelope, certPEM []byte) any {
	return map[string]any{"apiVersion": "0.0.1", "kind": "dsse", "spec": map[string]any{
		"proposedContent": map[string]any{"envelope": string(envelope), "verifiers": [][]byte{certPEM}},
	}}
}

// upload logs a proposed entry and returns it as cosign stores it.
func (c *rekorClient) upload(ctx context.Context, entry any) (*rekorBundle, error) {
	body, err := json.Marshal(entry)
	if err != nil {
		return nil, err
	}
	u := strings.TrimSuffix(c.url, "/") + "/api/v1/log/entries"
	wait := c.backoff
	for attempt := 0; ; attempt++ {
		b, retry, err := c.post(ctx, u, body)
		if err == nil || !retry || attempt >= c.retries {
			if err != nil {
				return nil, fmt.Errorf("Rekor %s: %w", c.url, err)
			}
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (c *rekorClient) post(ctx context.Context, u string, body []byte) (b *rekorBundle, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, true, err
	}
	if resp.StatusCode != http.StatusCreated {
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(data))
		}
		return nil, resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, fmt.Errorf("%s: %s", resp.Status, msg.Message)
	}
	var entries map[string]struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogID          string `json:"logID"`
		LogIndex       *int64 `json:"logIndex"`
		Verification   struct {
			SignedEntryTimestamp []byte `json:"signedEntryTimestamp"`
		} `json:"verification"`
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, false, fmt.Errorf("a malformed answer: %w", err)
	}
	if len(entries) != 1 {
		return nil, false, fmt.Errorf("%d entries in the answer, want the new one", len(entries))
	}
	for _, e := range entries {
		if _, err := base64.StdEncoding.DecodeString(e.Body); err != nil || e.Body == "" || e.LogID == "" || e.LogIndex == nil || e.IntegratedTime == 0 {
			return nil, false, fmt.Errorf("a malformed log entry in the answer")
		}
		if len(e.Verification.SignedEntryTimestamp) == 0 {
			return nil, false, fmt.Errorf("no signed entry timestamp in the answer")
		}
		b = &rekorBundle{SignedEntryTimestamp: e.Verification.SignedEntryTimestamp,
			Payload: rekorPayload{Body: e.Body, IntegratedTime: e.IntegratedTime, LogID: e.LogID, LogIndex: *e.LogIndex}}
	}
	return b, false, nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
