"""A notebook's results bundle: the plain files the measure pass keeps and the review pass reads.

Introduced in notebook 3.

One folder per notebook, results/bundles/<notebook>/ (LAB_BUNDLE names another folder for all
bundles; in the Docker stacks results/ is the Jupyter container's volume, so the bundle outlives
the container). Everything in it is CSV, JSON or text, readable without the lab:

    manifest.json       the notebook, the class version, the pass that wrote it, when, the
                        settings it ran with, the service URLs, whether it reached its end, and
                        every entry: {key: {"kind", "folder", "made"}}
    predictions.csv     your predictions, each with the time you made it and the pass
    lines.json          the lines you wrote, as checked: {step and what: text}
    claims.csv          every verdict the measure pass printed
    entries/<folder>/   one per run or reading of the node: perf runs (rows.csv, windows.csv,
                        output.txt, utilisation.csv, stats.json, served_config.json, run.json),
                        HTTP runs (requests.csv, run.json), values (value.json), and what each
                        printed (printed.txt)
    prepared.json       what the prepare pass recorded: your predictions and lines, with times

CLASS_VERSION names the lab's edition a bundle comes from; a review of a bundle from another one
is refused (raise it when a notebook's runs change). A bundle cut short (the lease ended before
the notebook's end) is reviewed for what it holds (servelab/passes/cut_short.py).

Every entry lives in a folder of its own under entries/, named by a plain name: a manifest that
names another place (`../..`, a path, a link out of the bundle) has that entry left out when the
bundle is opened, so neither pass writes or reads outside the bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from servelab.passes.choice import Stop
from servelab.paths import RESULTS

CLASS_VERSION = "2026.12"
MANIFEST = "manifest.json"


def bundles_root() -> Path:
    """Where every notebook's bundle lives: LAB_BUNDLE, else results/bundles/."""
    chosen = os.environ.get("LAB_BUNDLE")
    return Path(chosen) if chosen else RESULTS / "bundles"


def unpacked(notebook: str) -> Path | None:
    """A bundle downloaded as its .zip (the measure pass's last cell packs it) and put in the
    bundles folder as it is: unpacked there, when its folder is not; the folder (None: nothing
    to unpack, or a file whose members are not all inside that notebook's folder)."""
    root = bundles_root()
    packed = root / f"{notebook}.zip"
    if (root / notebook).exists() or not packed.is_file():
        return None
    with zipfile.ZipFile(packed) as archive:
        for name in archive.namelist():
            parts = PurePosixPath(name).parts
            if parts[:1] != (notebook,) or ".." in parts or name.startswith("/"):
                return None
        archive.extractall(root)
    return root / notebook


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


SLUG_CHARS = 80  # a folder name stays far below a file system's 255 bytes, with a suffix


def slug(key: str) -> str:
    """A folder name for an entry: the key's words, cut short (the manifest keeps the whole key;
    a config edit's key holds the whole fragment, 400 characters for notebook 8's ensemble)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_") or "entry"
    if len(name) <= SLUG_CHARS:
        return name
    return f"{name[:SLUG_CHARS]}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def write_json(path: Path, data) -> None:
    """Written whole or not at all (a kernel stopped mid-write leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2, default=str) + "\n")
    partial.replace(path)


@dataclass
class Bundle:
    """One notebook's bundle folder and its manifest."""

    folder: Path
    manifest: dict = field(default_factory=dict)

    left_out: list[str] = field(default_factory=list)  # entries naming a place outside it

    @classmethod
    def of(cls, notebook: str) -> Bundle:
        """The bundle of `notebook` (e.g. 04_fastapi_benchmarks), as it is on disk (maybe empty),
        its entries confined to it."""
        folder = bundles_root() / notebook
        path = folder / MANIFEST
        manifest = json.loads(path.read_text()) if path.is_file() else {}
        bundle = cls(folder, manifest if isinstance(manifest, dict) else {})
        entries = bundle.manifest.get("entries")
        if isinstance(entries, dict):
            bundle.left_out = [k for k, e in entries.items() if bundle._place(e) is None]
            for key in bundle.left_out:
                del entries[key]
        return bundle

    def _place(self, entry) -> Path | None:
        """Where an entry's files are: entries/<its folder>, if that is a plain name that stays
        inside the bundle (links resolved); else None."""
        name = entry.get("folder") if isinstance(entry, dict) else None
        plain = isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name
        if not plain or "\\" in name or "\0" in name:
            return None
        path = self.folder / "entries" / name
        inside = path.resolve().is_relative_to(self.folder.resolve() / "entries")
        return path if inside else None

    @property
    def exists(self) -> bool:
        return bool(self.manifest)

    def begin(self, notebook: str, lab_pass: str) -> None:
        """A measure pass starts: a new manifest, or this notebook's own one continued (a kernel
        restarted mid-lease keeps what was measured; a run measured again replaces its entry)."""
        if not self.exists:
            self.manifest = {
                "notebook": notebook,
                "class_version": CLASS_VERSION,
                "started": now(),
                "entries": {},
                "settings": {},
                "urls": {},
            }
        self.manifest.update(lab_pass=lab_pass, updated=now(), finished=False)
        self.save()

    def save(self) -> None:
        self.manifest["updated"] = now()
        write_json(self.folder / MANIFEST, self.manifest)

    def entry(self, key: str) -> dict | None:
        return self.manifest.get("entries", {}).get(key)

    def entry_folder(self, key: str, kind: str) -> Path:
        """The folder of entry `key`, made for a new entry (one folder per key)."""
        known = self.entry(key)
        if known and self._place(known) is not None:
            return self._place(known)
        taken = {e["folder"] for e in self.manifest["entries"].values()}
        name, n = slug(key), 1
        while name in taken:
            n += 1
            name = f"{slug(key)}_{n}"
        self.manifest["entries"][key] = {"kind": kind, "folder": name, "made": now()}
        return self.folder / "entries" / name

    def kept(self, key: str, kind: str) -> None:
        """Entry `key` was written: the manifest says when."""
        self.manifest["entries"][key].update(kind=kind, made=now())
        self.save()

    def files_of(self, key: str) -> Path | None:
        """The folder holding entry `key`'s files (None: no such entry, or its files are gone)."""
        known = self.entry(key)
        path = self._place(known) if known else None
        return path if path is not None and path.is_dir() else None

    def missing(self) -> list[str]:
        """The entries the manifest lists whose folder is gone."""
        return [key for key in self.manifest.get("entries", {}) if self.files_of(key) is None]

    def record(self, name: str, key: str, value) -> None:
        """One item of a JSON file of the bundle ({key: value}), e.g. lines.json."""
        path = self.folder / name
        data = json.loads(path.read_text()) if path.is_file() else {}
        data[key] = value
        write_json(path, data)

    def read(self, name: str) -> dict:
        path = self.folder / name
        return json.loads(path.read_text()) if path.is_file() else {}


def refusal(bundle: Bundle, notebook: str) -> str | None:
    """Why the review pass cannot read `bundle` for `notebook`, in one sentence (None: it can).
    Only a bundle that is not there, or not this notebook's of this class version, is refused; one
    cut short is reviewed for what it holds (servelab/passes/cut_short.py)."""
    where = bundle.folder
    if not bundle.exists:
        return (
            f"there is no bundle at {where}: the review pass reads what the measure pass kept; "
            "run the measure pass first, or bring the bundles back (notebook 2's last cell), or "
            f"unzip {notebook}.zip into {where.parent}."
        )
    m = bundle.manifest
    if m.get("notebook") != notebook:
        return f"the bundle at {where} is {m.get('notebook')}'s, not {notebook}'s."
    if m.get("class_version") != CLASS_VERSION:
        return (
            f"the bundle at {where} comes from class version {m.get('class_version')}, this "
            f"notebook is version {CLASS_VERSION}: review it with the notebooks that measured it."
        )
    return None


def cut_short(bundle: Bundle) -> bool:
    """Did the measure pass stop before the notebook's end, or are some of its files gone?"""
    return not bundle.manifest.get("finished") or bool(bundle.missing() or bundle.left_out)


def must_review(bundle: Bundle, notebook: str) -> None:
    said = refusal(bundle, notebook)
    if said:
        raise Stop(f"{notebook}: {said}")
