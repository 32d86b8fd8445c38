"""The lab's verdicts (introduced in notebook 4): each notebook's claims judged on your own runs,
which the notebook holds and hands over as arguments, with your predictions (what claims.predict
returned) beside them and the step's number, which heads each claim: the library looks up no run,
prediction or step by its name. One module per notebook, imported by it as `verdicts`:

    from servelab.verdicts import triton as verdicts    # notebook 6
    verdicts.queue_grows_with_load("6.1", c8, c16, N_GPUS, predicted_queue)

    fastapi.py    notebook 4: runtimes, queuing under 16 senders, two workers
    triton.py     notebook 6: queue against load, batches, instances, ONNX, bursts and batching
    hardware.py   notebook 7: the transports' send time
    ensemble.py   notebook 8: the three paths to a class, a second decoder
    ray_serve.py  notebook 9: replicas, autoscaling, a crash, Ray's path against Triton's
"""
