"""A stand-in identity provider for the `orch mcp` JWT tests, on PyJWT and cryptography
(PyPI; the MCP SDK depends on both): it makes signing keys, publishes their public
halves as a JSON Web Key Set, and signs tokens — an implementation of JWT nobody here
wrote.

    python jwt_issuer.py keys DIR [--kids k1,k2]     # DIR/jwks.json + private keys
    python jwt_issuer.py token DIR --kid k1 --claims '{"sub": "a", ...}' [--alg RS256]
                                   [--exp-in SECONDS] [--key-of OTHER_KID]

Key ids starting with `rsa` are RSA-2048 (RS256), `ec` P-256 (ES256); the set lists
every key made so far (so `keys` again with new kids rotates it: old keys stay).
`--key-of` signs with another kid's private key while naming `--kid` (a forgery).
`--alg HS256` signs with an HMAC secret made of the key id (a confusion attempt).
"""

import argparse
import json
import os
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

parser = argparse.ArgumentParser()
parser.add_argument("command", choices=["keys", "token"])
parser.add_argument("dir")
parser.add_argument("--kids", default="rsa1,ec1")
parser.add_argument("--kid")
parser.add_argument("--key-of")
parser.add_argument("--claims", default="{}")
parser.add_argument("--alg")
parser.add_argument("--exp-in", type=int, default=300)
args = parser.parse_args()


def private_path(kid):
    return os.path.join(args.dir, f"{kid}.pem")


def load(kid):
    with open(private_path(kid), "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


if args.command == "keys":
    os.makedirs(args.dir, exist_ok=True)
    for kid in args.kids.split(","):
        if os.path.exists(private_path(kid)):
            continue
        key = rsa.generate_private_key(65537, 2048) if kid.startswith("rsa") else ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        with open(private_path(kid), "wb") as f:
            f.write(pem)
    keys = []
    for name in sorted(os.listdir(args.dir)):
        if not name.endswith(".pem"):
            continue
        kid = name[:-4]
        public = load(kid).public_key()
        algo = jwt.algorithms.RSAAlgorithm if kid.startswith("rsa") else jwt.algorithms.ECAlgorithm
        jwk = algo.to_jwk(public, as_dict=True)
        jwk.update({"kid": kid, "use": "sig"})
        keys.append(jwk)
    tmp = os.path.join(args.dir, "jwks.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"keys": keys}, f)
    os.replace(tmp, os.path.join(args.dir, "jwks.json"))
else:
    claims = json.loads(args.claims)
    claims.setdefault("exp", int(time.time()) + args.exp_in)
    alg = args.alg or ("RS256" if args.kid.startswith("rsa") else "ES256")
    if alg.startswith("HS"):
        key = (args.kid * 32).encode()  # long enough for PyJWT to sign with
    else:
        key = load(args.key_of or args.kid)
    print(jwt.encode(claims, key, algorithm=alg, headers={"kid": args.kid}))
