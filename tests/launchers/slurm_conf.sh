# slurm_conf_settings: the settings every private test cluster shares (sourced, not run), printed
# for a slurm.conf; the caller adds its NodeName and PartitionName lines. Used by the one-host
# cluster of the launcher tests (slurm.sh) and the 3-host one of the netns tests (run_srun.sh).
#   slurm_conf_settings CLUSTER CTLD_HOST CTLD_ADDR CTLD_PORT SLURMD_PORT DIR TMPFS MUNGE_SOCKET
# DIR holds state, spools, pid files and logs; TMPFS may contain %n (the node name).
slurm_conf_settings() {
  local cluster=$1 ctld_host=$2 ctld_addr=$3 ctld_port=$4 slurmd_port=$5 dir=$6 tmpfs=$7 munge_socket=$8
  # The daemons run as whoever runs the test: root in CI (SlurmUser=root), which also lets
  # slurmd start the tasks as that user.
  local user
  user=$(id -un)
  cat <<EOC
# Private test cluster for ouro; nothing here touches the host's Slurm.
ClusterName=$cluster
SlurmctldHost=$ctld_host($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$tmpfs
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd or cgroup delegation here: track processes through /proc, no task confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node's real layout (sockets, threads, memory) may differ from the NodeName line; trust it.
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
EOC
}
