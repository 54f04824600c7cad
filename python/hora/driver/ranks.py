"""Rank numbers from the hosts an engine placed its tasks on, and each rank's environment.

horarun numbers ranks host by host, in the order of its host list; here the host list is the
order in which hosts first appear among the engine's slots (Spark's partitions, Ray's actors), so
the ranks of one host are consecutive and rank 0 is on the first slot's host. A host is what the
engine calls it (Spark: the executor's address; Ray: the node's id), never the machine's hostname:
two executors in different network namespaces of one machine share a hostname but not a network.
"""

import collections
import os

RankInfo = collections.namedtuple('RankInfo', [
    'rank', 'size', 'local_rank', 'local_size', 'cross_rank', 'cross_size', 'host',
    'host_index', 'num_hosts'])


def assign(hosts, names=None):
    """One RankInfo per slot, for slot i placed on hosts[i]; names maps a host to what the ranks
    call it (HORA_HOSTNAME; default the host itself)."""
    names = names or {}
    order = []
    slots_of = {}
    for slot, host in enumerate(hosts):
        if host not in slots_of:
            order.append(host)
            slots_of[host] = []
        slots_of[host].append(slot)
    size = len(hosts)
    local_sizes = [len(slots_of[h]) for h in order]
    infos = [None] * size
    rank = 0
    for host_index, host in enumerate(order):
        local_size = local_sizes[host_index]
        for local_rank, slot in enumerate(slots_of[host]):
            # The cross group of a local rank: the hosts holding at least local_rank + 1 ranks.
            cross = [i for i, n in enumerate(local_sizes) if n > local_rank]
            infos[slot] = RankInfo(rank, size, local_rank, local_size, cross.index(host_index),
                                   len(cross), names.get(host, host), host_index, len(order))
            rank += 1
    return infos


def rank_environment(info, rendezvous, secret_hex, start_timeout, master_addr, run_id):
    """What horarun sets for a rank (cli/spawn/rank_environment.cc, docs/environment.md), but for
    the variables of Horovod's HTTP rendezvous and the interface: no interface is named, so
    libhora binds on the source address of its route to the rendezvous, which every rank reaches
    because it is the address the engine's executors already reach the driver at."""
    s = {
        'rank': str(info.rank), 'size': str(info.size), 'local_rank': str(info.local_rank),
        'local_size': str(info.local_size), 'cross_rank': str(info.cross_rank),
        'cross_size': str(info.cross_size), 'host_index': str(info.host_index),
    }
    env = {
        'HORA_RANK': s['rank'], 'HORA_SIZE': s['size'],
        'HORA_LOCAL_RANK': s['local_rank'], 'HORA_LOCAL_SIZE': s['local_size'],
        'HORA_CROSS_RANK': s['cross_rank'], 'HORA_CROSS_SIZE': s['cross_size'],
        'HORA_HOSTNAME': info.host, 'HORA_HOST_INDEX': s['host_index'],
        'HORA_RENDEZVOUS': rendezvous, 'HORA_SECRET': secret_hex,
        'HORA_START_TIMEOUT': str(int(start_timeout)),
        'HOROVOD_RANK': s['rank'], 'HOROVOD_SIZE': s['size'],
        'HOROVOD_LOCAL_RANK': s['local_rank'], 'HOROVOD_LOCAL_SIZE': s['local_size'],
        'HOROVOD_CROSS_RANK': s['cross_rank'], 'HOROVOD_CROSS_SIZE': s['cross_size'],
        'HOROVOD_HOSTNAME': info.host,
        'HOROVOD_CONTROLLER': 'gloo', 'HOROVOD_CPU_OPERATIONS': 'gloo',
        'RANK': s['rank'], 'WORLD_SIZE': s['size'],
        'LOCAL_RANK': s['local_rank'], 'LOCAL_WORLD_SIZE': s['local_size'],
        'GROUP_RANK': s['host_index'], 'ROLE_RANK': s['rank'],
        'GROUP_WORLD_SIZE': str(info.num_hosts), 'ROLE_NAME': 'default',
        'ROLE_WORLD_SIZE': s['size'], 'TORCHELASTIC_RUN_ID': run_id,
        'TORCHELASTIC_RESTART_COUNT': '0', 'TORCHELASTIC_MAX_RESTARTS': '0',
        'MASTER_ADDR': master_addr,
        'PYTHONUNBUFFERED': '1',
    }
    # As horarun: several ranks on a host that each start one OpenMP thread per core thrash it.
    if info.local_size > 1 and 'OMP_NUM_THREADS' not in os.environ:
        env['OMP_NUM_THREADS'] = '1'
    return env
