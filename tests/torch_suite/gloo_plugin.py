"""The runner's control backend: gloo registered as a c10d plug-in named "gloo_plugin".

`run_suite.py --backend gloo_plugin` runs the suite through exactly the path a plug-in such as
ouro takes (registration by import, the feature-set rewrite, torch's plug-in branch of
new_group) with gloo's own collectives underneath. A test that passes under gloo but fails
here fails because of that path, not because of the collectives, which is the information
docs/TORCH-SUITE.md needs to tell an ouro bug from a property of being a plug-in.
"""
import torch.distributed as dist


def _create_gloo(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


dist.Backend.register_backend("gloo_plugin", _create_gloo)
