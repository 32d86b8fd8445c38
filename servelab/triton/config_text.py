"""config.pbtxt as text: parsed with Triton's own schema, and its top-level fields found, read
and replaced as written, comments kept.

Introduced in notebook 6 (triton_config.edit applies a fragment with it).

    config_text.parse_config(text)                  # ModelConfig; ParseError names a wrong field
    config_text.field_text(text, "dynamic_batching")   # the block as written in the file
    config_text.written_fields(text)                # {field: [its text as written], ...}
    config_text.replace_fields(text, fragment)      # each field of fragment in place of its own
    config_text.to_cpu(text)                        # KIND_GPU -> KIND_CPU, without `gpus`
    config_text.field_value(config, "dynamic_batching.max_queue_delay_microseconds")
"""

from __future__ import annotations

import re

from servelab.triton import schema


def parse_config(text: str):
    """config.pbtxt text -> Triton's ModelConfig protobuf; text_format.ParseError names any
    unknown field. (The schema: servelab/triton/schema.py, tritonclient's where it is installed.)"""
    from google.protobuf import text_format

    return text_format.Parse(text, schema.model_config())


_GPUS_LINE = re.compile(r"^[ \t]*gpus[ \t]*:[^\n]*\n?", re.MULTILINE)
_GPUS_INLINE = re.compile(r",?[ \t]*gpus[ \t]*:[ \t]*\[[^\]]*\]")


def to_cpu(config_text: str) -> str:
    """KIND_GPU -> KIND_CPU in every instance group, dropping the `gpus:` lists (invalid for CPU),
    on lines of their own or inline (`{ count: 1, kind: KIND_GPU, gpus: [ 0 ] }`)."""
    text = re.sub(r"\bKIND_GPU\b", "KIND_CPU", config_text)
    return _GPUS_INLINE.sub("", _GPUS_LINE.sub("", text))


def _field_end(text: str, start: int, i: int, name: str) -> int:
    """Where the top-level field `name` (its name ends at i) ends: after its block ({...} or
    [...]) or at the end of its value's line, skipping strings and comments."""
    n, depth, in_string = len(text), 0, False
    while i < n:
        c = text[i]
        if in_string:
            in_string = not (c == '"' and text[i - 1] != "\\")
        elif c == '"':
            in_string = True
        elif c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "\n" and depth == 0 and text[start:i].strip().rstrip(":").strip() != name:
            return i
        i += 1
    return i


def _top_level_fields(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every top-level field of a config.pbtxt text, skipping comments and
    strings; end includes the field's block ({...} or [...]) or value, and the rest of its line."""
    fields, i, n = [], 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        if text[i] == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i + 1
            continue
        start = i
        while i < n and (text[i].isalnum() or text[i] == "_"):
            i += 1
        name = text[start:i]
        if not name:
            raise ValueError(
                f"unexpected {text[start]!r} at top level of the config (position {start})"
            )
        i = _field_end(text, start, i, name)
        line_end = text.find("\n", i)
        end = n if line_end < 0 else line_end + 1
        if text[i:end].strip().startswith("#") or not text[i:end].strip():
            i = end
        fields.append((name, start, i))
    return fields


def _identity(text: str, name: str, start: int, end: int) -> str:
    """A field's identity: its name, and for a `parameters` entry (a map) its key as well."""
    if name == "parameters":
        key = re.search(r'key\s*:\s*"([^"]*)"', text[start:end])
        return f"parameters[{key.group(1) if key else ''}]"
    return name


def field_text(text: str, name: str) -> str:
    """The top-level field `name` of a config.pbtxt text as written there ('' if it has none):
    a block a student wrote in the file, to apply again with edit()."""
    return next((text[a:b].strip() for n, a, b in _top_level_fields(text) if n == name), "")


def written_fields(text: str) -> dict[str, list[str]]:
    """Every top-level field of a config.pbtxt text as written there, by its identity (its name;
    a `parameters` entry: "parameters[KEY]"), in the order written; a field written in several
    statements has several texts."""
    found: dict[str, list[str]] = {}
    for name, a, b in _top_level_fields(text):
        found.setdefault(_identity(text, name, a, b), []).append(text[a:b].strip())
    return found


def replace_fields(text: str, fragment: str, remove: tuple[str, ...] = ()) -> str:
    """text with each top-level field of `fragment` put in place of the field of that name (added at
    the end if there is none; `parameters` entries are matched by their key), and the fields named
    in `remove` taken out; everything else untouched."""
    new_fields = {
        _identity(fragment, n, a, b): fragment[a:b].strip()
        for n, a, b in _top_level_fields(fragment)
    }
    out, last, done = [], 0, set()
    for name, a, b in _top_level_fields(text):
        ident = _identity(text, name, a, b)
        if ident in new_fields or name in remove or ident in remove:
            out.append(text[last:a])
            if ident in new_fields and ident not in done:
                out.append(new_fields[ident] + "\n")
                done.add(ident)
            last = b
    out.append(text[last:])
    result = "".join(out)
    missing = [v for k, v in new_fields.items() if k not in done]
    if missing:
        result = result.rstrip("\n") + "\n\n" + "\n".join(missing) + "\n"
    return result


def field_value(message, path: str):
    """The value at a dotted path of a ModelConfig (the first element of a repeated message; a
    map's entry by its key, e.g. "parameters.precision.string_value"), or None where the config
    does not set it."""
    value, names = message, path.split(".")
    while names:
        name = names.pop(0)
        descriptor = value.DESCRIPTOR.fields_by_name.get(name)
        if descriptor is None:
            raise KeyError(f"{value.DESCRIPTOR.name} has no field {name}")
        # protobuf 6+ has is_repeated and drops label (the GPU machine's); 4.x has only label
        repeated = getattr(descriptor, "is_repeated", None)
        if repeated is None:
            repeated = descriptor.label == descriptor.LABEL_REPEATED
        entry = descriptor.message_type
        if entry is not None and entry.GetOptions().map_entry:  # parameters { key: ... }
            key, entries = names.pop(0), getattr(value, name)
            if key not in entries:
                return None
            value = entries[key]
        elif descriptor.message_type is not None and not repeated:
            if not value.HasField(name):
                return None
            value = getattr(value, name)
        elif repeated and descriptor.message_type is not None:
            items = getattr(value, name)
            if not items:
                return None
            value = items[0]
        else:
            got = getattr(value, name)
            if descriptor.enum_type is not None:
                names = descriptor.enum_type.values_by_number
                return [names[v].name for v in got] if repeated else names[got].name
            return list(got) if repeated else got
    return value
