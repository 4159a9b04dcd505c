"""A Linux guest under qemu for the Mininet engine's kernel links (``tooldns run --vm``).

A machine whose kernel lacks the netem qdisc (a container, a trimmed cloud kernel) cannot
give Mininet's ``TCLink`` delays. This package boots a distribution kernel that has it
(Debian's ``linux-image-amd64``) with the host's own root filesystem shared read-only over
9p under a tmpfs overlay, so the guest runs exactly the host's Python, Mininet and project
install; the run's output folder is shared read-write and the results land where a run on
the host would put them.

* :mod:`sim.vm.kernel` finds the guest kernel and the modules it needs before its root exists;
* :mod:`sim.vm.initramfs` builds the initramfs (static busybox, those modules, ``/init``);
* :mod:`sim.vm.machine` starts qemu (KVM where it can boot, TCG otherwise), streams its
  console and never leaves a qemu process behind;
* :mod:`sim.vm.job` turns a ``tooldns run`` command line into the guest's job and back.
"""
