"""The gate's job definitions name only what exists.

Zuul reads ``.zuul.yaml`` only once a change is proposed; a parent job, a
tox env, a devstack plugin or service misspelt there fails in the gate, not
here. So: it parses, each job's parent is one of ours or a job the
OpenStack gate defines, each tox env it runs is in tox.ini, each devstack
plugin and service it enables is the one devstack/settings defines, and
its file patterns match files of this repository.
"""

import configparser
import pathlib
import re

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]

# Jobs and templates of openstack/devstack, zuul/zuul-jobs and
# openstack/openstack-zuul-jobs this file may build on.
GATE_JOBS = {'devstack', 'devstack-minimal', 'devstack-base',
             'devstack-tox-functional', 'openstack-tox-pep8',
             'openstack-tox-docs', 'openstack-tox-functional-py3'}
GATE_TEMPLATES = {'openstack-python3-jobs', 'publish-openstack-docs-pti',
                  'release-notes-jobs-python3', 'check-requirements'}
# What a template runs, and what that needs in this repository.
TEMPLATE_NEEDS = {'openstack-python3-jobs': ['tox:py3'],
                  'publish-openstack-docs-pti': ['doc/source/conf.py',
                                                 'doc/requirements.txt'],
                  'release-notes-jobs-python3': [
                      'releasenotes/source/conf.py']}


def _zuul():
    return yaml.safe_load((REPO / '.zuul.yaml').read_text())


def _jobs():
    return {item['job']['name']: item['job'] for item in _zuul()
            if 'job' in item}


def _tox_envs():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / 'tox.ini')
    envs = {name.split(':', 1)[1] for name in tox.sections()
            if name.startswith('testenv:')}
    # Plain [testenv] runs any pyXY env.
    return envs | {'py3'}


def _devstack_settings():
    return (REPO / 'devstack' / 'settings').read_text()


def test_parses_into_jobs_and_one_project():
    items = _zuul()
    assert {next(iter(item)) for item in items} <= {'job', 'project'}
    assert [item for item in items if 'project' in item]
    assert _jobs()


def test_parents_and_templates_exist():
    jobs = _jobs()
    for name, job in jobs.items():
        assert job.get('parent') in GATE_JOBS | set(jobs), name
    project = next(item['project'] for item in _zuul() if 'project' in item)
    assert set(project['templates']) <= GATE_TEMPLATES
    for pipeline in ('check', 'gate'):
        for job in project[pipeline]['jobs']:
            name = job if isinstance(job, str) else next(iter(job))
            assert name in GATE_JOBS | set(jobs), (pipeline, name)
    for template in project['templates']:
        for need in TEMPLATE_NEEDS.get(template, []):
            if need.startswith('tox:'):
                assert need[4:] in _tox_envs(), need
            else:
                assert (REPO / need).exists(), need


def test_tox_envs_plugins_and_services_exist():
    settings = _devstack_settings()
    defined = set(re.findall(r'^define_plugin (\S+)', settings, re.M))
    enabled = set(re.findall(r'^enable_service (\S+)', settings, re.M))
    for name, job in _jobs().items():
        variables = job.get('vars', {})
        if 'tox_envlist' in variables:
            assert variables['tox_envlist'] in _tox_envs(), name
        ours = [p for p, url in variables.get('devstack_plugins', {}).items()
                if url.rstrip('/').endswith('/heat-health')]
        assert ours == sorted(defined), (name, ours)
        services = variables.get('devstack_services', {})
        assert {s for s in enabled if s in services} == enabled, name
        assert all(services[s] for s in enabled), name
        for project in job.get('required-projects', []):
            assert re.match(r'^[\w.-]+/[\w.-]+$', project), project


def test_file_patterns_match_files_of_this_repository():
    files = [str(p.relative_to(REPO)) for p in REPO.rglob('*')
             if p.is_file() and '.git' not in p.parts and
             '.localcloud' not in p.parts]
    for name, job in _jobs().items():
        for pattern in job.get('irrelevant-files', []):
            assert any(re.search(pattern, f) for f in files), (name, pattern)
        for key in ('pre-run', 'run', 'post-run'):
            found = job.get(key, [])
            for playbook in [found] if isinstance(found, str) else found:
                assert (REPO / playbook).is_file(), (name, playbook)
