"""The check of a Ray Serve deployment's options you write, read by Ray itself.

Introduced in notebook 9; the notebook calls it as exercises.deployment_options.
"""

from __future__ import annotations

from servelab import serve_options
from servelab.exercises.answers import NotYet, blank, not_written


def deployment_options(
    answer,
    step: str,
    what: str,
    base,
    needs: dict[str, object],
    where: str = "the text above it names each option",
):
    """Your options of the Ray Serve deployment `base` (base.options(...) or a dict of options;
    an autoscaling_config as a dict or Ray's AutoscalingConfig), read by Ray itself
    (servelab.serve_options); stops unless each option of `needs` ({option, or
    "autoscaling_config.<field>": value}) has that value, and while another option differs from
    base's. Returns the Deployment, ready for .bind()."""
    if blank(answer):
        raise not_written(step, f"{base.name}.options(...)", what, where)
    try:
        deployment = serve_options.deployment_of(answer, base)
        full = serve_options.effective(deployment, base)
        changed = serve_options.changed(deployment, base)
    except serve_options.NotOptions as exc:
        raise NotYet(f"{step}: {exc}.") from None
    for key, want in needs.items():
        if key not in full or not serve_options.same(full[key], want):
            has = f"`{key}={full[key]!r}`" if key in full else f"no `{key.split('.')[0]}`"
            raise NotYet(f"{step}: {what}: your options give {has}, the step needs `{key}={want}`.")
    autoscaled = any(k.startswith("autoscaling_config") for k in needs)
    for key in changed:
        if key in needs or (autoscaled and key in ("num_replicas", "autoscaling_config")):
            continue  # an autoscaling deployment's num_replicas is the autoscaler's
        field = key.split(".")[-1]
        why = serve_options.CHANGES.get(field, "it changes how the deployment runs")
        raise NotYet(f"{step}: {what}: leave `{field}` out of your options: {why}.")
    return deployment
