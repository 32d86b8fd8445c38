"""An edit of a config.pbtxt as Triton's own schema reads it: the fields it changed, made again in
another file that holds other fields beside them.

Introduced in notebook 6 (the measure pass makes the edits you wrote in the prepare pass in the
node's own file with it: servelab/triton/triton_config.py, to_edit).

    change = config_change.between(before, after)   # what your edit changed, field by field
    change.fields                                   # ["instance_group"], ["dynamic_batching"]
    text = change.made_in(node_text)                # the node's file with those fields changed

Both texts are parsed as Triton's ModelConfig (servelab/triton/schema.py), so a change is a
field's value, not a line: the node's file may hold fields the copy you edited did not (the
`parameters { key: "weights" ... }` block the node's repository adds), other comments, or
another value of the very field you changed (on a two-GPU node the measure pass loads 6.3d's
"all on GPU 0" between 6.3a and 6.3f): your value replaces the node's, the rest stays as the
node's file has it, comments included. A value is compared whole where Triton reads it whole (a
list such as `instance_group`, a `parameters` entry); inside a block (`dynamic_batching`) field
by field, so changing its delay keeps the node's preferred sizes. A change inside a block the
node's file does not have cannot be made (CannotMake says which).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format

from servelab.triton import config_text


class CannotMake(ValueError):
    """The change cannot be made in that file; the message says why, in the lesson's words."""


@dataclass(frozen=True)
class Change:
    """The fields an edit changed: each a path into ModelConfig (a `parameters` entry's key as
    its last part), with the edit's text before and after."""

    paths: tuple[tuple[str, ...], ...]
    before: str
    after: str

    @property
    def fields(self) -> list[str]:
        """The changed fields in config.pbtxt's dotted names: instance_group,
        dynamic_batching.max_queue_delay_microseconds, parameters.cpu_threads."""
        return [".".join(p) for p in self.paths]

    @property
    def top_level(self) -> list[str]:
        return sorted({p[0] for p in self.paths})

    def made_in(self, node_text: str) -> str:
        """node_text with this change made: each changed field set to the edit's value (or taken
        out where the edit took it out), every other field, comment and blank line as the node's
        file has them. Raises CannotMake, and ParseError for a node file Triton would refuse."""
        node = config_text.parse_config(node_text)
        after = config_text.parse_config(self.after)
        before = config_text.parse_config(self.before)
        for path in self.paths:
            _set(node, after, before, path)
        return _written(node_text, node, self)


def between(before: str, after: str) -> Change:
    """The change from `before` to `after` (two config.pbtxt texts), as Triton reads them;
    ParseError when either is not config.pbtxt Triton accepts."""
    old, new = config_text.parse_config(before), config_text.parse_config(after)
    return Change(tuple(_diff(old, new, ())), before, after)


# ---------------------------------------------------------------- the fields that differ


def _is_map(field) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _is_repeated(field) -> bool:
    # protobuf 6+ has is_repeated and drops label (the GPU machine's); 4.x has only label
    repeated = getattr(field, "is_repeated", None)
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def _set_names(old, new) -> list:
    """The fields set in either message, in the schema's order."""
    seen = {f.name: f for f, _ in old.ListFields()} | {f.name: f for f, _ in new.ListFields()}
    return sorted(seen.values(), key=lambda f: f.number)


def _diff(old, new, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    out = []
    for field in _set_names(old, new):
        name, here = field.name, (*prefix, field.name)
        if _is_map(field):
            mine, theirs = getattr(old, name), getattr(new, name)
            keys = sorted(set(mine) | set(theirs))
            out += [(*here, k) for k in keys if _entry(mine, k) != _entry(theirs, k)]
        elif _is_repeated(field) or field.message_type is None:
            if getattr(old, name) != getattr(new, name):
                out.append(here)
        elif old.HasField(name) and new.HasField(name):
            out += _diff(getattr(old, name), getattr(new, name), here)
        elif old.HasField(name) != new.HasField(name):
            out.append(here)
    return out


def _entry(entries, key):
    return entries[key] if key in entries else None


# ---------------------------------------------------------------- a field set in the node's file


def _set(node, after, before, path: tuple[str, ...]) -> None:
    """Field `path` of `node` set as `after` has it; CannotMake when it lies inside a block
    that `before` had and the node's file has not."""
    for depth, name in enumerate(path[:-1]):
        field = node.DESCRIPTOR.fields_by_name[name]
        if _is_map(field):  # the last part is the entry's key
            _set_entry(getattr(node, name), getattr(after, name), path[-1])
            return
        if not node.HasField(name):
            if before.HasField(name):
                raise CannotMake(
                    f"your edit changed {'.'.join(path)}, but this file has no "
                    f"`{'.'.join(path[: depth + 1])}` block any more to change it in"
                )
            getattr(node, name).SetInParent()
        node, after, before = getattr(node, name), getattr(after, name), getattr(before, name)
    name = path[-1]
    field = node.DESCRIPTOR.fields_by_name[name]
    if _is_repeated(field):
        node.ClearField(name)
        getattr(node, name).extend(getattr(after, name))
    elif field.message_type is not None:
        if after.HasField(name):
            getattr(node, name).CopyFrom(getattr(after, name))
        else:
            node.ClearField(name)
    else:
        setattr(node, name, getattr(after, name))


def _set_entry(entries, wanted, key: str) -> None:
    if key in wanted:
        entries[key].CopyFrom(wanted[key])
    elif key in entries:
        del entries[key]


# ---------------------------------------------------------------- the file, as text again


def _written(node_text: str, result, change: Change) -> str:
    """node_text with the changed top-level fields written as the edit wrote them (where the
    result holds them as the edit does) or as the schema prints them; checked to read back as
    `result`, else the whole file printed by the schema (comments lost, never a wrong config)."""
    after = config_text.parse_config(change.after)
    mine = config_text.written_fields(change.after)
    fragments, gone = [], []
    for identity, name, key in _identities(change):
        value = _value(result, name, key)
        if value is None:
            gone.append(identity)
        elif value == _value(after, name, key) and len(mine.get(identity, [])) == 1:
            fragments.append(mine[identity][0])
        else:
            fragments.append(_printed(result, name, key))
    text = config_text.replace_fields(node_text, "\n".join(fragments), tuple(gone))
    try:
        if config_text.parse_config(text) == result:
            return text
    except text_format.ParseError:
        pass
    return text_format.MessageToString(result)


def _identities(change: Change) -> list[tuple[str, str, str | None]]:
    """(identity as config_text names it, field, map key or None) of each top-level field the
    change touches."""
    out = []
    for path in change.paths:
        key = path[1] if path[0] == "parameters" else None
        ident = f"parameters[{key}]" if key is not None else path[0]
        if (ident, path[0], key) not in out:
            out.append((ident, path[0], key))
    return out


def _value(config, name: str, key: str | None):
    """A top-level field's value in `config` (a map entry by its key), None where unset."""
    if key is not None:
        return _entry(getattr(config, name), key)
    field = config.DESCRIPTOR.fields_by_name[name]
    if _is_repeated(field):
        return list(getattr(config, name)) or None
    if field.message_type is not None:
        return getattr(config, name) if config.HasField(name) else None
    value = getattr(config, name)
    return value if value != field.default_value else None


def _printed(config, name: str, key: str | None) -> str:
    """One top-level field of `config` as config.pbtxt text, on one line (a list in brackets)."""
    only = type(config)()
    if key is not None:
        getattr(only, name)[key].CopyFrom(getattr(config, name)[key])
        return text_format.MessageToString(only, as_one_line=True)
    field = config.DESCRIPTOR.fields_by_name[name]
    if _is_repeated(field) and field.message_type is not None:
        items = (text_format.MessageToString(m, as_one_line=True) for m in getattr(config, name))
        return f"{name} [ " + ", ".join(f"{{ {item} }}" for item in items) + " ]"
    if _is_repeated(field):
        getattr(only, name).extend(getattr(config, name))
    elif field.message_type is not None:
        getattr(only, name).CopyFrom(getattr(config, name))
    else:
        setattr(only, name, getattr(config, name))
    return text_format.MessageToString(only, as_one_line=True)
