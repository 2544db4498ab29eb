"""Latency of PATCH .../resources/{name} through heat-health vs Heat alone.

Starts a second heat-api on 127.0.0.1 (same heat.conf, same heat-engine,
Heat's pipeline without the heat_health filter), creates one stack, then
sends the same mark-unhealthy request to both APIs, interleaved, and prints
p50/p99 of each and their ratio. Needs ``tools/localcloud up``.

    python bench/mark_unhealthy.py [--requests 200] [--port 8014]
"""

import argparse
import configparser
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.functional import cloud as localcloud  # noqa: E402

FILTER = 'heat_health'


def plain_heat_api(port, workdir):
    """Write configs for a heat-api without the filter; return uwsgi ini."""
    etc = localcloud.STATE_DIR / 'etc'
    paste = configparser.RawConfigParser(strict=False)
    paste.optionxform = str
    paste.read(etc / 'api-paste.ini')
    for section in paste.sections():
        for key, value in paste.items(section):
            words = value.split()
            if FILTER in words:
                paste.set(section, key,
                          ' '.join(w for w in words if w != FILTER))
    paste.remove_section('filter:%s' % FILTER)
    paste_file = workdir / 'api-paste-plain.ini'
    with open(paste_file, 'w') as f:
        paste.write(f)

    extra_conf = workdir / 'heat-plain.conf'
    extra_conf.write_text('[paste_deploy]\napi_paste_config = %s\n'
                          % paste_file)

    ini = (etc / 'heat-api-uwsgi.ini').read_text().splitlines()
    out = []
    for line in ini:
        key = line.split('=', 1)[0].strip()
        if key == 'http-socket':
            line = 'http-socket = 127.0.0.1:%d' % port
        elif key == 'pyargv':
            line = '%s --config-file %s' % (line, extra_conf)
        out.append(line)
    ini_file = workdir / 'heat-api-plain-uwsgi.ini'
    ini_file.write_text('\n'.join(out) + '\n')
    return ini_file


def wait_answering(session, url, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if session.get(url, authenticated=False,
                           raise_exc=False).status_code < 500:
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit('heat-api without the filter did not answer at %s'
                     % url)


def percentile(samples, pct):
    ordered = sorted(samples)
    rank = int(round(pct / 100.0 * (len(ordered) - 1)))
    index = min(len(ordered) - 1, rank)
    return ordered[index]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--requests', type=int, default=200)
    parser.add_argument('--port', type=int, default=8014)
    args = parser.parse_args()

    demo = localcloud.Cloud('demo')
    workdir = localcloud.STATE_DIR / 'bench'
    workdir.mkdir(exist_ok=True)
    ini_file = plain_heat_api(args.port, workdir)
    uwsgi = pathlib.Path(sys.executable).parent / 'uwsgi'
    log = open(workdir / 'heat-api-plain.log', 'w')
    proc = subprocess.Popen([str(uwsgi), '--ini', str(ini_file)],
                            stdout=log, stderr=subprocess.STDOUT)
    stack = None
    try:
        wait_answering(demo.session, 'http://127.0.0.1:%d/' % args.port)
        stack = demo.create_stack('bench-mark', 'busy.yaml')
        url = demo.resource_url(stack, 'slow')
        plain_url = url.replace(':8004/', ':%d/' % args.port)
        assert plain_url != url, url
        body = json.dumps({'mark_unhealthy': True,
                           'resource_status_reason': 'bench'})
        headers = {'Content-Type': 'application/json'}
        timings = {url: [], plain_url: []}

        def send(target):
            start = time.perf_counter()
            resp = demo.session.request(target, 'PATCH', data=body,
                                        headers=headers, raise_exc=False)
            elapsed = time.perf_counter() - start
            if resp.status_code != 200:
                raise SystemExit('PATCH %s answered %d: %s'
                                 % (target, resp.status_code, resp.text))
            return elapsed

        for target in (url, plain_url):  # warm both paths up
            for _ in range(5):
                send(target)
        for i in range(args.requests):
            order = (url, plain_url) if i % 2 == 0 else (plain_url, url)
            for target in order:
                timings[target].append(send(target))

        ours, heat = timings[url], timings[plain_url]
        print('requests per route: %d (interleaved)' % args.requests)
        print('%-28s p50 %7.1f ms   p99 %7.1f ms   mean %7.1f ms'
              % ('heat-health filter + engine', percentile(ours, 50) * 1e3,
                 percentile(ours, 99) * 1e3, statistics.mean(ours) * 1e3))
        print('%-28s p50 %7.1f ms   p99 %7.1f ms   mean %7.1f ms'
              % ("Heat's built-in route", percentile(heat, 50) * 1e3,
                 percentile(heat, 99) * 1e3, statistics.mean(heat) * 1e3))
        print('ratio heat-health/Heat: p50 %.2f   p99 %.2f'
              % (percentile(ours, 50) / percentile(heat, 50),
                 percentile(ours, 99) / percentile(heat, 99)))
    finally:
        if stack is not None:
            demo.delete_stack(stack['stack_name'])
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
        log.close()


if __name__ == '__main__':
    main()
