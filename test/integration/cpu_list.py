"""CPU lists as Linux writes them (Cpus_allowed_list, sysfs cpulist): "0-3,8" <-> [0, 1, 2, 3, 8].
Imported by the placement checks of horarun_test.sh (bind-to, bind-to-socket)."""


def parse(text):
    out = []
    for part in filter(None, text.strip().split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def format_runs(cpus):
    runs, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        runs.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(runs)
