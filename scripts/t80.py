import sys
from workers.contract import problem as P

m = P.load_module(open(sys.argv[1]).read(), "p80", "/tmp/p80d")
print(P.scale_for_interpreter(m, {}))
print(P.scale_for_interpreter(m, {}, 4194304))
