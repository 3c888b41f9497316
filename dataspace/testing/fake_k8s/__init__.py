"""A loopback fake of the few Kubernetes API calls the sandbox controller makes.

``FakeKubernetes`` is an HTTP server on 127.0.0.1 that speaks exactly what the
``kubernetes`` sandbox backend uses, through the real ``kubernetes`` client:

* ``POST   /api/v1/namespaces/{ns}/pods``                 create
* ``GET    /api/v1/namespaces/{ns}/pods/{name}``          read
* ``GET    /api/v1/namespaces/{ns}/pods?labelSelector=``  list (paginated) and ``watch=true``
* ``DELETE /api/v1/namespaces/{ns}/pods/{name}``          delete
* ``GET    /api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name=``  events
* ``GET    /api/v1/namespaces/{ns}/pods/{name}/exec``     exec (websocket, channel
  protocols v5 and v4; every exec's bytes each way in ``exec_log``)
* ``GET    /api/v1/namespaces/{ns}/persistentvolumeclaims[/{name}]``  claims, with
  labels and annotations (``add_claim``), backed by folders shared with the pods
* ``GET    /api/v1/nodes``  the node, listing the images of the pods it ran
  (``node_gets_image`` scripts a pull that ends later)

Behind the API sits a small kubelet: containers run their real commands on this host, and
exec runs real processes with the pod's volumes at the paths the pod spec mounts them
(docs/cluster.md, "What the loopback fake models"). One module per concern:

* ``server``: the API server (``FakeKubernetes``): routes, pod creation, list, watch,
  exec, scripted faults (``fail_next``) and outages;
* ``policy``: what a real API server refuses (RBAC, namespaces, Pod Security, admission
  policies, quota), with its bodies;
* ``store``: pods, events and resource versions under one lock; the scripted
  ``Behaviour`` of pods;
* ``kubelet``: a pod's life: scheduling, init containers, status, deadlines, eviction,
  the kill-then-report order of a real kubelet;
* ``containers``: the container runtime (namespaces, private root, user, memory cgroups);
* ``network``: NetworkPolicies and the CNI of the pod network (``PodNetwork``);
* ``handler``: the HTTP plumbing: JSON replies, chunked watches, exec websockets.
"""

from dataspace.testing.fake_k8s.containers import KUBELET_ENV, chroot_runtime_available
from dataspace.testing.fake_k8s.network import PodNetwork
from dataspace.testing.fake_k8s.policy import NODE, NODE_ALLOCATABLE
from dataspace.testing.fake_k8s.server import RUNTIME_MANIFEST, FakeKubernetes, fake_kubernetes
from dataspace.testing.fake_k8s.store import Behaviour

__all__ = [
    "KUBELET_ENV",
    "NODE",
    "NODE_ALLOCATABLE",
    "RUNTIME_MANIFEST",
    "Behaviour",
    "FakeKubernetes",
    "PodNetwork",
    "chroot_runtime_available",
    "fake_kubernetes",
]
