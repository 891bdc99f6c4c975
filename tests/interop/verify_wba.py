"""Verifies a Web Bot Auth request signature with pyauth's
http-message-signatures (an RFC 9421 implementation of its own, not the
proxy's code), against the keys of a key directory.

    verify_wba.py DIRECTORY_JSON URL SIGNATURE_AGENT SIGNATURE_INPUT SIGNATURE

URL is the one the request was sent to (its authority is `@authority`).
Exits 0 when the signature verifies, tagged web-bot-auth, covering
@authority and the Signature-Agent member it names; 1 otherwise, saying why.
"""
import base64
import json
import sys

import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, HTTPSignatureKeyResolver, algorithms


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Directory(HTTPSignatureKeyResolver):
    def __init__(self, jwks):
        self.keys = {}
        for jwk in jwks["keys"]:
            if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
                self.keys[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(b64url(jwk["x"]))

    def resolve_public_key(self, key_id):
        return self.keys.get(key_id)


def main():
    directory, url, agent, sig_input, signature = sys.argv[1:6]
    with open(directory) as f:
        jwks = json.load(f)
    request = requests.Request(
        "GET",
        url,
        headers={"Signature-Agent": agent, "Signature-Input": sig_input, "Signature": signature},
    ).prepare()
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=Directory(jwks))
    try:
        results = verifier.verify(
            request,
            expect_tag="web-bot-auth",
            require_components=["@authority", '"signature-agent";key="agent1"'],
        )
    except Exception as e:  # noqa: BLE001 - any failure is "does not verify"
        print(f"does not verify: {type(e).__name__}: {e}")
        return 1
    print(f"verifies: {len(results)} signature(s), keyid {results[0].parameters.get('keyid')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
