"""A Ray Serve deployment's options read as Ray reads them (notebook 9's exercises).

Introduced in notebook 9; exercises.deployment_options() answers in your terms with it.

You write a deployment's options as Ray takes them: `FoodClassifier.options(num_replicas=2,
max_ongoing_requests=1)`, or the same as a dict, and an autoscaling_config as a dict or Ray's
AutoscalingConfig. Ray itself parses them (its DeploymentConfig and AutoscalingConfig schemas:
"2" and 2.0 are 2, a wrong type or a value out of range is refused with Ray's words). One thing
Ray lets pass is caught here: a misspelt key of autoscaling_config, which Ray ignores without a
word (`max_replica: 4` would leave max_replicas at 1).

    effective(answer, base) -> {option: value}  # what Ray would run, "autoscaling_config.x" flat
    changed(answer, base) -> {option: value}    # the options that differ from base's

Ray is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

# what an option does to a measurement, for a refusal's reason (options not listed: "changes how
# the deployment runs")
CHANGES = {
    "num_replicas": "it sets how many copies of the model serve",
    "max_ongoing_requests": "it sets how many requests a replica takes at once",
    "max_queued_requests": "it refuses requests once that many wait, a different experiment",
    "ray_actor_options": "it changes the CPUs each replica reserves, so where replicas fit",
    "max_replicas_per_node": "it changes where replicas are placed",
    "autoscaling_config": "it lets Ray change the number of replicas during the run",
    "initial_replicas": "it changes how many replicas run when the step starts",
}


class NotOptions(ValueError):
    """The answer is not deployment options Ray accepts; the text says why, in Ray's words."""


def _deployment_types():
    from ray.serve import Deployment
    from ray.serve.config import AutoscalingConfig

    return Deployment, AutoscalingConfig


def _autoscaling_dict(value) -> dict | None:
    """An autoscaling_config as written (dict or AutoscalingConfig) -> the keys set, checked."""
    _, AutoscalingConfig = _deployment_types()
    if value is None:
        return None
    if isinstance(value, AutoscalingConfig):
        return value.model_dump(exclude_unset=True)  # Ray parsed it already
    if not isinstance(value, dict):
        raise NotOptions(
            f"autoscaling_config is a dict (or Ray's AutoscalingConfig), not a "
            f"{type(value).__name__}"
        )
    unknown = sorted(set(value) - set(AutoscalingConfig.model_fields))
    if unknown:
        raise NotOptions(
            f"autoscaling_config has no field {unknown[0]!r} (Ray would ignore it without a "
            f"word); its fields include min_replicas, max_replicas, target_ongoing_requests, "
            "upscale_delay_s and downscale_delay_s"
        )
    return dict(value)


def deployment_of(answer, base):
    """The Deployment Ray makes of `answer` (options as a dict, or base.options(...) itself)."""
    Deployment, _ = _deployment_types()
    if isinstance(answer, Deployment):
        if answer.func_or_class is not base.func_or_class:
            raise NotOptions(f"start from {base.name}: write {base.name}.options(...)")
        return answer
    if not isinstance(answer, dict):
        raise NotOptions(
            f"write {base.name}.options(name=value, ...) (or a dict of options), not a "
            f"{type(answer).__name__}"
        )
    _autoscaling_dict(answer.get("autoscaling_config"))
    try:
        return base.options(**answer)
    except TypeError as exc:  # an option Ray does not have
        raise NotOptions(str(exc).replace("Deployment.options()", "Ray")) from None
    except ValueError as exc:  # pydantic's ValidationError is one; Ray's own checks too
        lines = [line.strip() for line in str(exc).split("\n") if line.strip()]
        raise NotOptions(" ".join(lines[:3]).rstrip(".")) from None


def effective(answer, base) -> dict:
    """What Ray would run: the deployment's options, autoscaling_config's fields flattened as
    "autoscaling_config.<field>" (absent when it does not autoscale)."""
    deployment = deployment_of(answer, base)
    config = deployment._deployment_config  # Ray's parsed DeploymentConfig (no public reader)
    out = {
        "num_replicas": config.num_replicas,
        "max_ongoing_requests": config.max_ongoing_requests,
        "max_queued_requests": config.max_queued_requests,
        "ray_actor_options": deployment.ray_actor_options,
        "max_replicas_per_node": deployment._replica_config.max_replicas_per_node,
    }
    if config.autoscaling_config is not None:
        out["autoscaling_config"] = True
        for field, value in config.autoscaling_config.model_dump().items():
            out[f"autoscaling_config.{field}"] = value
    return out


def changed(answer, base) -> dict:
    """The options of `answer` whose values differ from base's (a default written out is no
    change)."""
    _, AutoscalingConfig = _deployment_types()
    ours, theirs = effective(answer, base), effective({}, base)
    defaults = {f"autoscaling_config.{k}": v for k, v in AutoscalingConfig().model_dump().items()}
    theirs = {**defaults, **theirs}  # Ray's defaults of the fields you did not set
    return {k: v for k, v in ours.items() if theirs.get(k) != v}


def same(got, want) -> bool:
    """Equal as Ray reads them: numbers as numbers (2 == 2.0), the rest as they are."""
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        try:
            return float(got) == float(want)
        except (TypeError, ValueError):
            return False
    return got == want
