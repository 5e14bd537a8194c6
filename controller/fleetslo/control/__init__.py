"""The control plane (`fleetslo run`): sources, actuators, the Kubernetes edge, loop, service, audit."""
