"""A stand-in for Chameleon, so notebooks 1 and 2 run for real in the tests.

- `api.FakeChameleon`: one HTTP server on 127.0.0.1 answering the APIs python-chi (1.1 and
  1.2.10) reaches (Chameleon's site list and hardware catalog, JupyterHub's token refresh,
  Keystone, Blazar, Nova, Neutron, Glance), with the request and answer shapes of the real
  services; Blazar, Nova and Neutron are in `blazar.py`, `nova.py`, `neutron.py`. python-chi talks
  to it through its normal client stack (keystoneauth, novaclient, neutronclient, glanceclient,
  blazarclient, openstacksdk); a request the real service would refuse is refused, a Neutron
  path that names no resource answers 404 as Neutron does (and is marked in the log: python-chi
  1.2.10's default Server.delete() sends one), and anything else the fake does not know answers
  501, so a wrong call fails the test. It answers for two sites (`common.SITES`: CHI@TACC and
  CHI@UC, each with its own inventory, network and image ids, addresses and state), keeps the
  site's clock (`common.py`: the notebooks' waits move it on) and fails as the site does when a
  scenario asks (`faults`: 5xx answers and reset connections).
- `classroom.populate`: the other 39 students of a class in the same project (leases, servers,
  floating IPs; leases ACTIVE, STARTING, PENDING and ended; user names that hold the student's
  and are held in it), around the student under test.
- `node.FakeNode`: the bare-metal node: an SSH server (paramiko) on port 22 of the floating IP
  bound to the student's server, whose shell runs each command with bash in the node's home, with
  stub system commands (apt, systemctl, docker, nvidia-smi, cloud-init, make ...) on PATH, and the
  `ray` that `make ray-node` leaves; a second FakeNode answers for the student's second server
  (node2-serve-system-<user>, notebook 2's optional section), on that server's IP only.
- `harness`: runs scenarios (`scenarios.py`) inside a private network namespace
  (`unshare -rn`), so the floating IPs and port 22 exist only there, from a copy of the notebooks
  laid out as a Trovi launch lays it out, and writes what happened as JSON; `results` runs them
  for the tests in a few workers (each one server and one kernels' zygote, `kernels.py`, for all
  its scenarios) and reads the JSON.
"""
