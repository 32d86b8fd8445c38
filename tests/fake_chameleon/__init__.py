"""A stand-in for Chameleon, so notebooks 1 and 2 run for real in the tests.

- `api.FakeChameleon`: one HTTP server on 127.0.0.1 answering the APIs python-chi 1.2.10 reaches
  (Chameleon's site list and hardware catalog, JupyterHub's token refresh, Keystone, Blazar, Nova,
  Neutron, Glance), with the request and answer shapes of the real services. python-chi talks to
  it through its normal client stack (keystoneauth, novaclient, neutronclient, glanceclient,
  blazarclient, openstacksdk); a request the real service would refuse is refused, and anything
  the fake does not know answers 501, so a wrong call fails the test.
- `node.FakeNode`: the bare-metal node: an SSH server (paramiko) on the floating IP's port 22,
  whose shell runs each command with bash in the node's home, with stub system commands (apt,
  systemctl, docker, nvidia-smi, cloud-init ...) on PATH.
- `harness`: runs a scenario inside a private network namespace (`unshare -rn`), so the floating
  IP and port 22 exist only there, and writes what happened as JSON for the test to check.
"""
