// Package fakesigstore is a FAKE Sigstore for tests, on loopback: an OIDC
// issuer that mints tokens, a Fulcio (the v1 signingCert API) with a
// throw-away CA that embeds an SCT from a throw-away CT log key, and a
// Rekor (POST /api/v1/log/entries) that signs entry timestamps and
// checkpoints with a throw-away log key. Nothing it issues is trusted
// anywhere but where its TrustedRoot is loaded on purpose. It speaks just
// enough of each protocol for a client to sign and a verifier to check.
package fakesigstore

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-openapi/runtime"
	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/sigstore/rekor/pkg/generated/models"
	rekortypes "github.com/sigstore/rekor/pkg/types"
	_ "github.com/sigstore/rekor/pkg/types/dsse/v0.0.1"         // the entry kinds it logs
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1" //
	"github.com/sigstore/sigstore-go/pkg/root"
)

// Server is one fake Sigstore: three loopback HTTP servers and their keys.
type Server struct {
	Issuer string // the fake OIDC issuer's URL (tokens name it; nothing is served)
	Fulcio *httptest.Server
	Rekor  *httptest.Server
	// Actions serves a GitHub-Actions-like token endpoint: GET
	// /token?audience=sigstore with "Authorization: bearer ActionsBearer".
	Actions       *httptest.Server
	ActionsBearer string
	// ActionsIdentity is the identity of the tokens Actions hands out.
	ActionsIdentity string
	// TokenTTL and CertTTL are how long the tokens it mints and the
	// certificates Fulcio issues are valid (ten minutes when zero), as
	// GitHub's tokens expire minutes after they are fetched.
	TokenTTL, CertTTL time.Duration
	// ActionsServed counts the tokens Actions handed out.
	ActionsServed atomic.Int64

	issuerKey, caKey, interKey, ctKey, rekorKey *ecdsa.PrivateKey
	ca, inter                                   *x509.Certificate

	mu     sync.Mutex
	leaves [][]byte // the log's entries, canonical bodies
	refuse string   // Fulcio refuses every request with this, if set
	limit  int      // Rekor answers 503 once it holds this many entries, if > 0
}

// New starts a fake Sigstore; Close stops it.
func New() (*Server, error) {
	s := &Server{Issuer: "https://fake-oidc.dorisarm.invalid", ActionsBearer: "fake-actions-bearer",
		ActionsIdentity: "https://github.com/dorisarm/dorisarm/.github/workflows/release.yml@refs/tags/v1"}
	for _, k := range []**ecdsa.PrivateKey{&s.issuerKey, &s.caKey, &s.interKey, &s.ctKey, &s.rekorKey} {
		var err error
		if *k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake sigstore root (tests only)"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, caT, caT, s.caKey.Public(), s.caKey)
	if err != nil {
		return nil, err
	}
	if s.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	interT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fake sigstore intermediate (tests only)"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	if der, err = x509.CreateCertificate(rand.Reader, interT, s.ca, s.interKey.Public(), s.caKey); err != nil {
		return nil, err
	}
	if s.inter, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	s.Fulcio = httptest.NewServer(http.HandlerFunc(s.fulcio))
	s.Rekor = httptest.NewServer(http.HandlerFunc(s.rekor))
	s.Actions = httptest.NewServer(http.HandlerFunc(s.actions))
	return s, nil
}

// Close stops the servers.
func (s *Server) Close() {
	s.Fulcio.Close()
	s.Rekor.Close()
	s.Actions.Close()
}

// Refuse makes Fulcio refuse every request with reason ("" to accept again).
func (s *Server) Refuse(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = reason
}

// FailRekorAfter makes Rekor answer 503 Service Unavailable once it holds
// n entries (0: never).
func (s *Server) FailRekorAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = n
}

// Logged is how many entries Rekor logged.
func (s *Server) Logged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leaves)
}

// Token mints an OIDC token (ES256 JWT, audience sigstore, valid ten
// minutes) for identity: a URI (a workflow) or an email address.
func (s *Server) Token(identity string) string {
	claims := map[string]any{"iss": s.Issuer, "sub": identity, "aud": "sigstore",
		"iat": time.Now().Unix(), "exp": time.Now().Add(ttl(s.TokenTTL)).Unix()}
	if strings.Contains(identity, "@") && !strings.Contains(identity, "://") {
		claims["email"], claims["email_verified"] = identity, true
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signed := b64url(hdr) + "." + b64url(body)
	h := sha256.Sum256([]byte(signed))
	r, ss, err := ecdsa.Sign(rand.Reader, s.issuerKey, h[:])
	if err != nil {
		panic(err) // crypto/rand failing
	}
	sig := append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	return signed + "." + b64url(sig)
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// checkToken verifies a token minted by Token and returns its claims.
func (s *Server) checkToken(tok string) (map[string]any, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, errors.New("bad signature encoding")
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&s.issuerKey.PublicKey, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, errors.New("token not signed by the fake issuer")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c["aud"] != "sigstore" {
		return nil, fmt.Errorf("audience %v, want sigstore", c["aud"])
	}
	if exp, _ := c["exp"].(float64); time.Unix(int64(exp), 0).Before(time.Now()) {
		return nil, errors.New("token expired")
	}
	return c, nil
}

// actions hands out tokens like GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL.
func (s *Server) actions(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "bearer "+s.ActionsBearer {
		http.Error(w, "fake actions: bad bearer token", http.StatusUnauthorized)
		return
	}
	if r.URL.Query().Get("audience") != "sigstore" {
		http.Error(w, "fake actions: want audience=sigstore", http.StatusBadRequest)
		return
	}
	s.ActionsServed.Add(1)
	json.NewEncoder(w).Encode(map[string]string{"value": s.Token(s.ActionsIdentity)})
}

// OIDs of Fulcio's issuer extensions and the embedded SCT list.
var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}
	oidSCTList  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
)

// fulcio answers POST /api/v1/signingCert (the body is the certificate
// then its chain, PEM, as Fulcio's v1 API returns them; cosign v2 and
// dorisarm ask it) and POST /api/v2/signingCert (JSON with the chain, as
// sigstore-go and cosign v3 ask it): a ten-minute code-signing certificate
// for the token's identity, with an embedded SCT.
func (s *Server) fulcio(w http.ResponseWriter, r *http.Request) {
	v2 := r.URL.Path == "/api/v2/signingCert"
	if r.Method != http.MethodPost || (r.URL.Path != "/api/v1/signingCert" && !v2) {
		http.Error(w, "fake fulcio: only POST /api/v1/signingCert and /api/v2/signingCert", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	refuse := s.refuse
	s.mu.Unlock()
	if refuse != "" {
		http.Error(w, "fake fulcio: "+refuse, http.StatusUnauthorized)
		return
	}
	claims, err := s.checkToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil {
		http.Error(w, "fake fulcio: "+err.Error(), http.StatusUnauthorized)
		return
	}
	var key, proof []byte
	if v2 {
		var req struct {
			PublicKeyRequest struct {
				PublicKey struct {
					Content string `json:"content"`
				} `json:"publicKey"`
				ProofOfPossession []byte `json:"proofOfPossession"`
			} `json:"publicKeyRequest"`
		}
		err = json.NewDecoder(r.Body).Decode(&req)
		key, proof = []byte(req.PublicKeyRequest.PublicKey.Content), req.PublicKeyRequest.ProofOfPossession
	} else {
		var req struct {
			PublicKey struct {
				Content []byte `json:"content"`
			} `json:"publicKey"`
			SignedEmailAddress []byte `json:"signedEmailAddress"`
		}
		err = json.NewDecoder(r.Body).Decode(&req)
		key, proof = req.PublicKey.Content, req.SignedEmailAddress
	}
	if err != nil {
		http.Error(w, "fake fulcio: "+err.Error(), http.StatusBadRequest)
		return
	}
	if b, _ := pem.Decode(key); b != nil {
		key = b.Bytes
	}
	pub, err := x509.ParsePKIXPublicKey(key)
	ek, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok {
		http.Error(w, "fake fulcio: want an ECDSA public key (DER or PEM)", http.StatusBadRequest)
		return
	}
	sub, _ := claims["sub"].(string)
	if e, _ := claims["email"].(string); e != "" {
		sub = e
	}
	h := sha256.Sum256([]byte(sub))
	if !ecdsa.VerifyASN1(ek, h[:], proof) {
		http.Error(w, "fake fulcio: the proof of possession is not the subject signed with the key", http.StatusBadRequest)
		return
	}
	der, err := s.issue(ek, sub, claims["iss"].(string))
	if err != nil {
		http.Error(w, "fake fulcio: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var chain []string
	for _, c := range [][]byte{der, s.inter.Raw, s.ca.Raw} {
		chain = append(chain, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})))
	}
	if v2 {
		var resp struct {
			SignedCertificateEmbeddedSct struct {
				Chain struct {
					Certificates []string `json:"certificates"`
				} `json:"chain"`
			} `json:"signedCertificateEmbeddedSct"`
		}
		resp.SignedCertificateEmbeddedSct.Chain.Certificates = chain
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK) // what sigstore-go's client takes
		json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "application/pem-certificate-chain")
	w.WriteHeader(http.StatusCreated)
	for _, c := range chain {
		io.WriteString(w, c)
	}
}

// issue makes the leaf certificate: first without the SCT list, to have
// the CT log sign its TBS (as a precertificate's), then the same template
// with the SCT list added, which verifiers strip to get that TBS back.
func (s *Server) issue(pub *ecdsa.PublicKey, identity, issuer string) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	v2, _ := asn1.MarshalWithParams(issuer, "utf8")
	now := time.Now().Truncate(time.Second)
	t := &x509.Certificate{SerialNumber: serial, NotBefore: now, NotAfter: now.Add(ttl(s.CertTTL)),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV1, Value: []byte(issuer)}, {Id: oidIssuerV2, Value: v2}}}
	if u, err := url.Parse(identity); err == nil && u.Scheme != "" && u.Host != "" {
		t.URIs = []*url.URL{u}
	} else {
		t.EmailAddresses = []string{identity}
	}
	der, err := x509.CreateCertificate(rand.Reader, t, s.inter, pub, s.interKey)
	if err != nil {
		return nil, err
	}
	pre, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ctDER, _ := x509.MarshalPKIXPublicKey(s.ctKey.Public())
	sct := ct.SignedCertificateTimestamp{SCTVersion: ct.V1, LogID: ct.LogID{KeyID: sha256.Sum256(ctDER)},
		Timestamp: uint64(time.Now().UnixMilli())}
	leaf := ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType, TimestampedEntry: &ct.TimestampedEntry{
		EntryType: ct.PrecertLogEntryType, Timestamp: sct.Timestamp,
		PrecertEntry: &ct.PreCert{IssuerKeyHash: sha256.Sum256(s.inter.RawSubjectPublicKeyInfo), TBSCertificate: pre.RawTBSCertificate}}}
	in, err := ct.SerializeSCTSignatureInput(sct, ct.LogEntry{Leaf: leaf})
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(in)
	sig, err := ecdsa.SignASN1(rand.Reader, s.ctKey, h[:])
	if err != nil {
		return nil, err
	}
	sct.Signature = ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.SHA256, Signature: cttls.ECDSA}, Signature: sig}
	one, err := cttls.Marshal(sct)
	if err != nil {
		return nil, err
	}
	list, err := cttls.Marshal(struct {
		SCTList []struct {
			Val []byte `tls:"minlen:1,maxlen:65535"`
		} `tls:"minlen:1,maxlen:65335"`
	}{SCTList: []struct {
		Val []byte `tls:"minlen:1,maxlen:65535"`
	}{{Val: one}}})
	if err != nil {
		return nil, err
	}
	ext, err := asn1.Marshal(list)
	if err != nil {
		return nil, err
	}
	t.ExtraExtensions = append(t.ExtraExtensions, pkix.Extension{Id: oidSCTList, Value: ext})
	return x509.CreateCertificate(rand.Reader, t, s.inter, pub, s.interKey)
}

// logID is a log's ID: the SHA-256 of its public key (DER).
func logID(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(k.Public())
	h := sha256.Sum256(der)
	return h[:]
}

// rekor answers POST /api/v1/log/entries: it checks and canonicalizes the
// proposed entry with Rekor's own entry types, appends it to an in-memory
// RFC 6962 tree and returns the entry with its signed entry timestamp and
// inclusion proof.
func (s *Server) rekor(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/log/entries" {
		http.Error(w, `{"code":404,"message":"fake rekor: only POST /api/v1/log/entries"}`, http.StatusNotFound)
		return
	}
	pe, err := models.UnmarshalProposedEntry(r.Body, runtime.JSONConsumer())
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"code":400,"message":%q}`, "fake rekor: "+err.Error()), http.StatusBadRequest)
		return
	}
	ctx := context.Background()
	e, err := rekortypes.CreateVersionedEntry(pe)
	var body []byte
	if err == nil {
		body, err = rekortypes.CanonicalizeEntry(ctx, e)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"code":400,"message":%q}`, "fake rekor: "+err.Error()), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.limit > 0 && len(s.leaves) >= s.limit {
		s.mu.Unlock()
		http.Error(w, `{"code":503,"message":"fake rekor: unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	s.leaves = append(s.leaves, body)
	leaves := append([][]byte{}, s.leaves...)
	s.mu.Unlock()
	idx := int64(len(leaves) - 1)
	hashes := make([][]byte, len(leaves))
	for i, l := range leaves {
		hashes[i] = leafHash(l)
	}
	rootHash := treeHash(hashes)
	var proof []string
	for _, p := range path(int(idx), hashes) {
		proof = append(proof, hex.EncodeToString(p))
	}
	id := hex.EncodeToString(logID(s.rekorKey))
	now := time.Now().Unix()
	// The SET signs the canonical JSON of these four fields (keys sorted).
	set, err := json.Marshal(struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogID          string `json:"logID"`
		LogIndex       int64  `json:"logIndex"`
	}{base64.StdEncoding.EncodeToString(body), now, id, idx})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	setSig, err := s.sign(set)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cp, err := s.checkpoint(int64(len(leaves)), rootHash)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	size := int64(len(leaves))
	uuid := hex.EncodeToString(hashes[idx])
	out := map[string]models.LogEntryAnon{uuid: {
		Body: base64.StdEncoding.EncodeToString(body), IntegratedTime: &now, LogID: &id, LogIndex: &idx,
		Verification: &models.LogEntryAnonVerification{SignedEntryTimestamp: setSig,
			InclusionProof: &models.InclusionProof{Checkpoint: &cp, Hashes: proof, LogIndex: &idx,
				RootHash: ptr(hex.EncodeToString(rootHash)), TreeSize: &size}}}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", uuid) // which entry of the answer is the new one
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(out)
}

func ptr[T any](v T) *T { return &v }

func (s *Server) sign(msg []byte) ([]byte, error) {
	h := sha256.Sum256(msg)
	return ecdsa.SignASN1(rand.Reader, s.rekorKey, h[:])
}

// checkpoint is a signed note of the tree's size and root.
func (s *Server) checkpoint(size int64, rootHash []byte) (string, error) {
	// A Rekor v1 signed tree head names its tree ("host - treeID"), its
	// signature line the host.
	const host = "fake-rekor.dorisarm.invalid"
	note := fmt.Sprintf("%s - 1\n%d\n%s\n", host, size, base64.StdEncoding.EncodeToString(rootHash))
	sig, err := s.sign([]byte(note))
	if err != nil {
		return "", err
	}
	return note + "\n\u2014 " + host + " " + base64.StdEncoding.EncodeToString(append(logID(s.rekorKey)[:4], sig...)) + "\n", nil
}

// RFC 6962 hashing.
func leafHash(b []byte) []byte {
	h := sha256.Sum256(append([]byte{0}, b...))
	return h[:]
}

func nodeHash(l, r []byte) []byte {
	h := sha256.Sum256(append(append([]byte{1}, l...), r...))
	return h[:]
}

func split(n int) int { // the largest power of two below n
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

func treeHash(hs [][]byte) []byte {
	if len(hs) == 1 {
		return hs[0]
	}
	k := split(len(hs))
	return nodeHash(treeHash(hs[:k]), treeHash(hs[k:]))
}

func path(m int, hs [][]byte) [][]byte {
	if len(hs) <= 1 {
		return nil
	}
	k := split(len(hs))
	if m < k {
		return append(path(m, hs[:k]), treeHash(hs[k:]))
	}
	return append(path(m-k, hs[k:]), treeHash(hs[:k]))
}

// TrustedRoot trusts exactly this fake: its CA, CT log and Rekor.
func (s *Server) TrustedRoot() (*root.TrustedRoot, error) { return s.trustedRoot(true) }

// TrustedRootWithoutCT is TrustedRoot without the CT log, under which the
// certificates' SCTs do not verify.
func (s *Server) TrustedRootWithoutCT() (*root.TrustedRoot, error) { return s.trustedRoot(false) }

func (s *Server) trustedRoot(withCT bool) (*root.TrustedRoot, error) {
	start := time.Now().Add(-time.Hour)
	ca := &root.FulcioCertificateAuthority{Root: s.ca, Intermediates: []*x509.Certificate{s.inter}, ValidityPeriodStart: start, URI: s.Fulcio.URL}
	tlog := func(k *ecdsa.PrivateKey, u string) map[string]*root.TransparencyLog {
		id := logID(k)
		return map[string]*root.TransparencyLog{hex.EncodeToString(id): {BaseURL: u, ID: id, ValidityPeriodStart: start,
			HashFunc: crypto.SHA256, PublicKey: k.Public(), SignatureHashFunc: crypto.SHA256}}
	}
	ctlogs := map[string]*root.TransparencyLog{}
	if withCT {
		ctlogs = tlog(s.ctKey, "https://fake-ct.dorisarm.invalid")
	}
	return root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{ca}, ctlogs, nil, tlog(s.rekorKey, s.Rekor.URL))
}

// PEM is a PEM encoding of the public halves, for tools that take them
// one by one: the root and intermediate certificates, the Rekor and CT log
// keys.
func (s *Server) PEM() (roots, rekorKey, ctKey []byte) {
	var b bytes.Buffer
	pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: s.inter.Raw})
	pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw})
	pk := func(k *ecdsa.PrivateKey) []byte {
		der, _ := x509.MarshalPKIXPublicKey(k.Public())
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	return b.Bytes(), pk(s.rekorKey), pk(s.ctKey)
}

// Certificate is a certificate that Fulcio would issue for pub and
// identity, with its SCT embedded, and the intermediate that issued it.
func (s *Server) Certificate(pub *ecdsa.PublicKey, identity string) (leaf, issuer *x509.Certificate, err error) {
	der, err := s.issue(pub, identity, s.Issuer)
	if err != nil {
		return nil, nil, err
	}
	leaf, err = x509.ParseCertificate(der)
	return leaf, s.inter, err
}

// CTKey is the CT log's public key.
func (s *Server) CTKey() crypto.PublicKey { return s.ctKey.Public() }

// ttl is d, or ten minutes when zero.
func ttl(d time.Duration) time.Duration {
	if d == 0 {
		return 10 * time.Minute
	}
	return d
}
