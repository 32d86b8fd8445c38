"""Triton Inference Server from a notebook (introduced in notebook 5; notebook 6 edits and watches).

    from servelab.triton import config_text, instances, triton_config, triton_stats
    triton_config.edit("food_classifier", instances.instance_group(2, N_GPUS))  # edit, reload
    triton_stats.model_stats("food_classifier")   # what the model did, as Triton counts it

Its files:

    model_repository.py  the staged models copied into Triton's model repository (notebook 5;
                         `python -m servelab.triton.model_repository`)
    config_text.py       config.pbtxt as text: parsed by Triton's schema, fields read and replaced
    schema.py            that schema: tritonclient's, or the same kept for passes without it
    triton_config.py     a served model's config edited and reloaded while Triton runs
    config_change.py     an edit as the fields it changed, made again in another config.pbtxt
    prepared_edit.py     the measure pass makes your prepare pass's edits in the node's file
    instances.py         where Triton puts a model's instances, the fragment that puts them there
    triton_stats.py      Triton's view of itself: statistics, metrics read, utilisation sampled
    live_metrics.py      those metrics drawn live while a load runs
    gpu_names.py         each GPU by one number: `gpus: [ i ]`, nvidia-smi and nvtop agree
    gpus.py              where each instance runs on the GPUs, checked against its config
    gpu_scaling.py       the utilisation law per GPU, and what a second GPU buys
"""
