"""Print, sorted, the platform manifest digests that the index attestations
in cosign verify-attestation's output (one DSSE envelope per line) name:
the provenance's resolved dependencies (with their target and the build's
externalParameters), the SBOM's CONTAINER packages, the scan's clean
platforms. e2e-cosign.sh compares them with the index's manifests."""
import base64
import json
import sys

for line in open(sys.argv[1]):
    if not line.strip():
        continue
    st = json.loads(base64.b64decode(json.loads(line)["payload"]))
    p = st["predicate"]
    if st["predicateType"] == "https://slsa.dev/provenance/v1":
        ds = ["sha256:" + d["digest"]["sha256"] for d in p["buildDefinition"]["resolvedDependencies"]
              if d["annotations"]["target"] and d["annotations"]["externalParameters"]["target"] == d["annotations"]["target"]]
    elif st["predicateType"] == "https://spdx.dev/Document":
        ds = ["sha256:" + c["checksumValue"] for q in p["packages"]
              if q.get("primaryPackagePurpose") == "CONTAINER" for c in q["checksums"]]
    else:
        ds = [q["digest"] for q in p["platforms"] if q["summary"]["clean"] and q["target"]]
    print(" ".join(sorted(ds)))
