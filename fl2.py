import sys,time,signal,json; sys.path.insert(0,'/srv/pv'); from drv import *
b=B(); create(b,"fl2","/srv/pv/h")
b.p.stdin.write(json.dumps(dict(op="write",path="host/h/f2.txt",content="y"))+"\n"); b.p.stdin.flush()
time.sleep(2)
t=time.time(); b.p.send_signal(signal.SIGINT)
line=b.p.stdout.readline(); print(time.time()-t, line)
try: print("rc", b.p.wait(timeout=10), time.time()-t)
except Exception as e: print("HANG", e); b.p.kill()
