package sign

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	rekorclient "github.com/sigstore/rekor/pkg/client"
	rekorgen "github.com/sigstore/rekor/pkg/generated/client"
	"github.com/sigstore/rekor/pkg/generated/models"
)

// rekorLog uploads entries to a Rekor log with cosign's upload functions
// over Rekor's own API client.
type rekorLog struct {
	url    string
	client *rekorgen.Rekor
}

// newRekorLog is the log at url; a failed upload is retried retries times
// (network errors, 429 and 5xx: the Rekor client's retry policy).
func newRekorLog(url string, retries uint) (*rekorLog, error) {
	c, err := rekorclient.GetRekorClient(url, rekorclient.WithUserAgent("dorisarm"), rekorclient.WithRetryCount(retries))
	if err != nil {
		return nil, fmt.Errorf("transparency log (Rekor %s): %w", url, err)
	}
	return &rekorLog{url: url, client: c}, nil
}

// uploadSignature logs a signature of pl by the certificate's (or key's)
// public key (a hashedrekord entry) and returns the entry.
func (r *rekorLog) uploadSignature(ctx context.Context, pl, sig, signerPEM []byte) (*models.LogEntryAnon, error) {
	h := sha256.New()
	h.Write(pl)
	e, err := cosign.TLogUpload(ctx, r.client, sig, h, signerPEM)
	return r.checked(e, err)
}

// uploadEnvelope logs a DSSE envelope signed by the certificate's (or
// key's) public key (a dsse entry); Rekor hashes the envelope as sent.
func (r *rekorLog) uploadEnvelope(ctx context.Context, env, signerPEM []byte) (*models.LogEntryAnon, error) {
	e, err := cosign.TLogUploadDSSEEnvelope(ctx, r.client, env, signerPEM)
	return r.checked(e, err)
}

// checked checks that the log answered with a whole entry and a signed
// entry timestamp: an answer without one is an error naming the log.
func (r *rekorLog) checked(e *models.LogEntryAnon, err error) (*models.LogEntryAnon, error) {
	switch {
	case err != nil:
	case e == nil || e.Body == nil || e.IntegratedTime == nil || e.LogID == nil || e.LogIndex == nil:
		err = errors.New("a malformed log entry in the answer")
	case e.Verification == nil || len(e.Verification.SignedEntryTimestamp) == 0:
		err = errors.New("no signed entry timestamp in the answer")
	}
	if err != nil {
		return nil, fmt.Errorf("transparency log (Rekor %s): %w", r.url, err)
	}
	return e, nil
}
