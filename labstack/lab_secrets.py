"""The local stack's secrets: made once, kept in .lab/ (0600), never printed, never on a command
line, and kept out of what must not see them.

- the Jupyter token and Triton's admin key (secrets.env): JupyterLab and the Triton watchdog get
  them in their environments, notebooks through urls.env (servelab.labenv.load);
- the Ray cluster's token (ray_token, a file of its own): Ray reads it from the path in
  RAY_AUTH_TOKEN_PATH (RAY_AUTH_MODE=token), so only the path is handed around, never the value;
  on Chameleon the same file is copied to the second node (docs/security.md).

Ray's processes run whatever code a job or a driver sends, so their environment is the
launcher's minus every secret (without_secrets): a job that prints os.environ shows none.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from labstack.lab_files import RAY_TOKEN, SECRETS, write_private

SECRET_KEYS = ("JUPYTER_TOKEN", "TRITON_ADMIN_KEY")
# Names of variables that hold a credential by convention (Jupyter's, JupyterHub's, OpenStack's
# application credentials on Chameleon, cloud keys): never passed to Ray's processes
_CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_KEY|ADMIN_KEY|CREDENTIAL|PRIVATE_KEY", re.I)
_RAY_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")  # a mode and a path: what Ray needs


def lab_secrets() -> dict:
    """The Jupyter token and Triton's admin key: made once, the same after every restart."""
    values = {}
    if SECRETS.exists():
        values = dict(
            line.split("=", 1) for line in SECRETS.read_text().splitlines() if "=" in line
        )
    if not all(values.get(k) for k in SECRET_KEYS):
        values = {k: values.get(k) or secrets.token_hex(16) for k in SECRET_KEYS}
        write_private(SECRETS, "".join(f"{k}={v}\n" for k, v in values.items()))
    return values


def ray_token() -> Path:
    """The Ray cluster's token file (absolute path), made once: 256 random bits as hex, as
    `ray get-auth-token --generate` makes them. Returns the path, never the token."""
    if not RAY_TOKEN.exists() or not RAY_TOKEN.read_text().strip():
        write_private(RAY_TOKEN, secrets.token_hex(32))
    RAY_TOKEN.chmod(0o600)
    return RAY_TOKEN.resolve()


def ray_auth_env() -> dict:
    """What every Ray process of the lab, and notebook 9's client, needs to use the token."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(ray_token())}


def redact(text: str, env: dict) -> str:
    """text with the value of every secret the launcher knows replaced by its name."""
    known = {k: v for k in SECRET_KEYS for v in (env.get(k), os.environ.get(k)) if v}
    if SECRETS.exists():
        known.update({k: v for k, v in lab_secrets().items() if v})
    if RAY_TOKEN.exists():
        known["RAY_AUTH_TOKEN"] = RAY_TOKEN.read_text().strip()
    for name, value in known.items():
        if value:
            text = text.replace(value, f"${name}")
    return text


def without_secrets(env: dict) -> dict:
    """`env` without the lab's secrets: no variable named like a credential (but Ray's own mode
    and token path), none whose value holds a secret of the lab (a Jupyter URL with its token)."""
    values = [v for v in lab_secrets().values() if v] if SECRETS.exists() else []
    values += [os.environ[k] for k in SECRET_KEYS if os.environ.get(k)]
    if RAY_TOKEN.exists():
        values.append(RAY_TOKEN.read_text().strip())
    return {
        k: v
        for k, v in env.items()
        if k in _RAY_AUTH
        or not (k in SECRET_KEYS or _CREDENTIAL_NAME.search(k) or any(s in v for s in values))
    }
