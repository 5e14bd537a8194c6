"""The Kubernetes API edge of the controller: client and error mapping, workloads and their scale
subresource, pods, the engine-args patch, Events and the leader-election Lease.

Everything here speaks the official ``kubernetes`` client and hands plain values and classified
``fleetslo.core.errors`` up; nothing here decides anything.
"""
