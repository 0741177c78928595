#!/usr/bin/env python3
"""Writes the fake hwloc 2.x XML topologies the gpu_topology tests load (run it from this folder).

Each file is what `lstopo --of xml` prints on a GPU server, cut down to what ouro reads:
packages with their NUMA node and PUs, the PCI tree (host bridge, PCIe switch ports, devices),
the OS devices the cuda/nvml/verbs plugins add (cuda0, nvml0, mlx5_0, ib0), and the
"NVLinkBandwidth" distances matrix hwloc's nvml plugin builds (MB/s, 25000 per NVLink 2-4,
1000000 on the diagonal, gp-indexed NVML OS devices). `lstopo -i FILE --distances` checks one.
"""
import itertools

HOST_BRIDGE, PCI = 0, 1
OSDEV_GPU, OSDEV_NETWORK, OSDEV_OPENFABRICS, OSDEV_COPROC = 1, 2, 3, 5


class Writer:
    def __init__(self):
        self.gp = 0
        self.lines = []
        self.nvml_gp = []  # gp index of nvmlN, N = position
        self.switch_gp = []

    def next_gp(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)


def cpuset(pus):
    mask = 0
    for pu in pus:
        mask |= 1 << pu
    return "0x%08x" % mask


def write(path, packages, pus_per_package, pci_tree, nvlink=None, note="", nvswitches=None):
    """pci_tree[p] = list of switches under package p's host bridge; each switch a list of
    devices: ("gpu", bus, model) or ("nic", bus, name)."""
    w = Writer()
    all_pus = list(range(packages * pus_per_package))
    nodes = "0x%08x" % ((1 << packages) - 1)
    w.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    if note:
        w.emit(0, "<!-- %s -->" % note)
    w.emit(0, '<topology version="2.0">')
    w.emit(1, '<object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" allowed_cpuset="%s" '
              'nodeset="%s" complete_nodeset="%s" allowed_nodeset="%s" gp_index="%d">'
           % (cpuset(all_pus), cpuset(all_pus), cpuset(all_pus), nodes, nodes, nodes, w.next_gp()))
    w.emit(2, '<info name="Backend" value="Linux"/>')
    w.emit(2, '<info name="hwlocVersion" value="2.9.0"/>')
    gpu_index = 0
    nic_index = 0
    bus_base = 0x10
    for p in range(packages):
        pus = all_pus[p * pus_per_package:(p + 1) * pus_per_package]
        node = "0x%08x" % (1 << p)
        cs = cpuset(pus)
        w.emit(2, '<object type="Package" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                  'complete_nodeset="%s" gp_index="%d">' % (p, cs, cs, node, node, w.next_gp()))
        w.emit(3, '<object type="NUMANode" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                  'complete_nodeset="%s" gp_index="%d" local_memory="68719476736"/>'
               % (p, cs, cs, node, node, w.next_gp()))
        for pu in pus:
            one = cpuset([pu])
            w.emit(3, '<object type="Core" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                      'complete_nodeset="%s" gp_index="%d">' % (pu, one, one, node, node, w.next_gp()))
            w.emit(4, '<object type="PU" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                      'complete_nodeset="%s" gp_index="%d"/>' % (pu, one, one, node, node, w.next_gp()))
            w.emit(3, "</object>")
        switches = pci_tree[p]
        first_bus = bus_base
        last_bus = bus_base + 0x0f
        bus_base += 0x10
        w.emit(3, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]">'
               % (w.next_gp(), first_bus, last_bus))
        sec = first_bus
        for s, devices in enumerate(switches):
            up_bus = sec
            sec += 1
            sub = sec + 2 * len(devices)
            w.emit(4, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="1" bridge_pci="0000:[%02x-%02x]" '
                      'pci_busid="0000:%02x:%02x.0" pci_type="0604 [10b5:8747] [0000:0000] ca" pci_link_speed="15.753846">'
                   % (w.next_gp(), sec, sub, first_bus, s))
            for d, dev in enumerate(devices):
                port_bus = sec
                dev_bus = sec + 1
                sec += 2
                w.emit(5, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="2" bridge_pci="0000:[%02x-%02x]" '
                          'pci_busid="0000:%02x:%02x.0" pci_type="0604 [10b5:8747] [0000:0000] ca" pci_link_speed="15.753846">'
                       % (w.next_gp(), dev_bus, dev_bus, port_bus, d))
                if dev[0] == "gpu":
                    w.emit(6, '<object type="PCIDev" gp_index="%d" pci_busid="0000:%02x:00.0" '
                              'pci_type="0302 [10de:20b0] [10de:1450] a1" pci_link_speed="31.507692">'
                           % (w.next_gp(), dev_bus))
                    w.emit(7, '<object type="OSDev" gp_index="%d" name="cuda%d" subtype="CUDA" osdev_type="%d">'
                           % (w.next_gp(), gpu_index, OSDEV_COPROC))
                    w.emit(8, '<info name="Backend" value="CUDA"/>')
                    w.emit(8, '<info name="GPUVendor" value="NVIDIA Corporation"/>')
                    w.emit(8, '<info name="GPUModel" value="%s"/>' % dev[2])
                    w.emit(7, "</object>")
                    if nvlink is not None or nvswitches:
                        gp = w.next_gp()
                        w.nvml_gp.append(gp)
                        w.emit(7, '<object type="OSDev" gp_index="%d" name="nvml%d" subtype="NVML" osdev_type="%d">'
                               % (gp, gpu_index, OSDEV_GPU))
                        w.emit(8, '<info name="Backend" value="NVML"/>')
                        w.emit(8, '<info name="GPUVendor" value="NVIDIA Corporation"/>')
                        w.emit(8, '<info name="GPUModel" value="%s"/>' % dev[2])
                        w.emit(7, "</object>")
                    gpu_index += 1
                else:
                    w.emit(6, '<object type="PCIDev" gp_index="%d" pci_busid="0000:%02x:00.0" '
                              'pci_type="0207 [15b3:101b] [15b3:0007] 00" pci_link_speed="31.507692">'
                           % (w.next_gp(), dev_bus))
                    w.emit(7, '<object type="OSDev" gp_index="%d" name="ib%d" osdev_type="%d">'
                           % (w.next_gp(), nic_index, OSDEV_NETWORK))
                    w.emit(8, '<info name="Address" value="00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:%02x:%02x:%02x"/>'
                           % (nic_index, dev_bus, d))
                    w.emit(7, "</object>")
                    w.emit(7, '<object type="OSDev" gp_index="%d" name="%s" osdev_type="%d">'
                           % (w.next_gp(), dev[2], OSDEV_OPENFABRICS))
                    w.emit(8, '<info name="NodeGUID" value="0c42:a103:00%02x:%04x"/>' % (nic_index, dev_bus))
                    w.emit(7, "</object>")
                    nic_index += 1
                w.emit(6, "</object>")
                w.emit(5, "</object>")
            w.emit(4, "</object>")
        if p == 0 and nvswitches:
            # As the nvml plugin marks them: NVIDIA bridge-class PCI devices, subtype NVSwitch.
            for k in range(len(nvswitches)):
                gp = w.next_gp()
                w.switch_gp.append(gp)
                w.emit(4, '<object type="PCIDev" gp_index="%d" subtype="NVSwitch" pci_busid="0000:%02x:00.0" '
                          'pci_type="0680 [10de:1af1] [10de:0000] a1" pci_link_speed="0.000000"/>' % (gp, sec + k))
        w.emit(3, "</object>")
        w.emit(2, "</object>")
    w.emit(1, "</object>")
    if nvswitches:
        # GPU-to-switch links only, so the matrix mixes OS devices and PCI devices (distances2hetero).
        objs = [("OSDev", g) for g in w.nvml_gp] + [("PCIDev", g) for g in w.switch_gp]
        n = len(objs)
        ngpu = len(w.nvml_gp)
        values = [[0] * n for _ in range(n)]
        for i in range(n):
            values[i][i] = 1000000
        for k, per_gpu in enumerate(nvswitches):
            for g, bw in enumerate(per_gpu):
                values[g][ngpu + k] = values[ngpu + k][g] = bw
        w.emit(1, '<distances2hetero nbobjs="%d" kind="25" name="NVLinkBandwidth" indexing="gp">' % n)
        text = " ".join("%s:%d" % o for o in objs)
        w.emit(2, '<indexes length="%d">%s</indexes>' % (len(text), text))
        for row in values:
            text = " ".join(str(v) for v in row)
            w.emit(2, '<u64values length="%d">%s</u64values>' % (len(text), text))
        w.emit(1, "</distances2hetero>")
    if nvlink is not None:
        n = len(w.nvml_gp)
        values = []
        for i in range(n):
            for j in range(n):
                values.append(1000000 if i == j else nvlink(i, j))
        # kind 9 = FROM_OS | MEANS_BANDWIDTH, as the nvml plugin sets it.
        w.emit(1, '<distances2 type="OSDev" nbobjs="%d" kind="9" name="NVLinkBandwidth" indexing="gp">' % n)
        # length counts the characters of the content, not the values.
        text = " ".join(str(g) for g in w.nvml_gp)
        w.emit(2, '<indexes length="%d">%s</indexes>' % (len(text), text))
        for row in range(n):
            text = " ".join(str(v) for v in values[row * n:(row + 1) * n])
            w.emit(2, '<u64values length="%d">%s</u64values>' % (len(text), text))
        w.emit(1, "</distances2>")
    w.emit(0, "</topology>")
    with open(path, "w") as f:
        f.write("\n".join(w.lines) + "\n")


def gpu(bus_model="NVIDIA A100-SXM4-80GB"):
    return ("gpu", 0, bus_model)


# (a) Two sockets, four GPUs each behind two PCIe switches; the first switch of each socket also
# holds that socket's NIC. NVLink joins the four GPUs of a socket all to all (two links each),
# none crosses sockets: a good ring crosses the socket boundary exactly twice.
write("two_sockets_nvlink.xml", 2, 4,
      [[[gpu(), gpu(), ("nic", 0, "mlx5_0")], [gpu(), gpu()]],
       [[gpu(), gpu(), ("nic", 0, "mlx5_1")], [gpu(), gpu()]]],
      nvlink=lambda i, j: 50000 if i // 4 == j // 4 else 0,
      note="2 sockets x 4 GPUs, NVLink (50 GB/s) only within a socket, one NIC per socket")

# (b) Eight GPUs, every pair NVLinked (one link, 25 GB/s) as through an NVSwitch, and the pairs
# of one ring 0-3-6-1-4-7-2-5 with three links (75 GB/s): the only ring whose every hop is fast.
PLANTED = [0, 3, 6, 1, 4, 7, 2, 5]
FAST = {frozenset((PLANTED[k], PLANTED[(k + 1) % 8])) for k in range(8)}
write("nvswitch_uneven.xml", 1, 8,
      [[[gpu("NVIDIA H100 80GB HBM3") for _ in range(4)], [gpu("NVIDIA H100 80GB HBM3") for _ in range(4)]]],
      nvlink=lambda i, j: 75000 if frozenset((i, j)) in FAST else 25000,
      note="8 GPUs all pairs NVLinked, ring 0-3-6-1-4-7-2-5 with 3 links per hop, the rest 1")

# (c) No NVLink: eight GPUs under two PCIe switches of one socket, a NIC on the second switch.
write("pcie_two_switches.xml", 1, 4,
      [[[gpu("Tesla T4") for _ in range(4)], [gpu("Tesla T4") for _ in range(4)] + [("nic", 0, "mlx5_0")]]],
      note="8 GPUs without NVLink under two PCIe switches, one NIC on the second switch")

# (d) Four GPUs NVLinked only to two NVSwitches (two links, 50 GB/s, to each), but GPU 3 has a
# single link to the second switch: hwloc's matrix holds GPU-to-switch entries, which ouro closes
# over the switches into GPU pairs (hwloc_distances_transform).
write("nvswitch_ports.xml", 1, 4,
      [[[gpu("NVIDIA A100-SXM4-40GB") for _ in range(4)]]],
      note="4 GPUs linked to 2 NVSwitches (GPU 3 with one link fewer), no GPU-GPU NVLink entries",
      nvswitches=[[50000, 50000, 50000, 50000], [50000, 50000, 50000, 25000]])
