// instances.js: the runtime instances' capacity descriptors (operator role), refreshed every
// two seconds: node and host, provider and transport, status, run slots, workers, queue.

import {h, clear, badge, table, ago, every, isAbort} from '../dom.js';
import {get} from '../api.js';
import {errorBox, pageHeader, liveDot} from '../view.js';

// meter shows used/total as a bar with the numbers.
function meter(used, total, title) {
  const pct = total > 0 ? Math.min(100, Math.round((used / total) * 100)) : 0;
  const fill = h('span', {class: 'meter-fill'});
  fill.style.width = pct + '%';
  return h('span', {class: 'meter-wrap', title},
    h('span', {class: ['meter', pct >= 100 ? 'full' : '']}, fill), h('span', {class: 'meter-text'}, `${used}/${total}`));
}

// hostOf is the logical node (host) id; node_id is the actor system (cluster member) id.
function hostOf(i) {
  return i.host_id || (i.metadata && i.metadata['node.id']) || '';
}

export async function render(v) {
  const tenant = v.query.get('tenant') || '';
  const live = liveDot('live');
  const count = h('span', {class: 'muted'});
  v.main.append(pageHeader('Instances', count, live));
  if (tenant) {
    v.main.append(h('p', {class: 'filters'}, 'Visible to tenant ', h('strong', {}, tenant), ' · ', h('a', {href: '#/instances'}, 'all instances')));
  }
  const body = h('div', {id: 'instances-table'});
  v.main.append(body);
  let stop = false;
  const refresh = async () => {
    if (stop) return;
    let list;
    try {
      list = (await get('/v1/instances' + (tenant ? '?tenant_id=' + encodeURIComponent(tenant) : ''), v.signal)).instances || [];
    } catch (e) {
      if (isAbort(e)) throw e;
      clear(body).append(errorBox(e));
      live.set('stopped');
      if (e.status === 401 || e.status === 403) stop = true;
      return;
    }
    live.set('live');
    list.sort((a, b) => a.runtime_instance_id.localeCompare(b.runtime_instance_id));
    count.textContent = `${list.length} instance${list.length === 1 ? '' : 's'}`;
    clear(body).append(table([
      {label: 'Instance', cell: (i) => h('div', {}, h('div', {class: 'mono'}, i.runtime_instance_id),
        h('div', {class: 'sub mono', title: 'endpoint'}, i.endpoint))},
      {label: 'Node', cell: (i) => h('div', {}, h('div', {}, hostOf(i) || '—'),
        i.node_id ? h('div', {class: 'sub mono', title: 'cluster member (actor system) id ' + i.node_id}, 'member ' + i.node_id.slice(0, 8)) : null)},
      {label: 'Provider', cell: (i) => h('div', {}, h('div', {}, i.provider_name), h('div', {class: 'sub'}, i.transport_name))},
      {label: 'Status', cell: (i) => [badge(i.status),
        i.is_queue_paused ? h('span', {class: 'chip warn'}, 'paused') : null,
        i.is_draining ? h('span', {class: 'chip warn'}, 'draining') : null,
        i.can_accept_run ? null : h('span', {class: 'chip muted'}, 'full')]},
      {label: 'Run slots', cell: (i) => meter(i.max_concurrent_runs - i.available_run_slots, i.max_concurrent_runs,
        `${i.available_run_slots} of ${i.max_concurrent_runs} slots free; ${i.running_run_count} running, ${i.active_run_count} active`)},
      {label: 'Workers', cell: (i) => meter(i.worker_count - i.available_worker_count, i.worker_count,
        `${i.available_worker_count} of ${i.worker_count} workers free; up to ${i.max_local_workers_per_execution} per execution`)},
      {label: 'Queue', cell: (i) => meter(i.queued_run_count, i.queue_capacity, `${i.queued_run_count} queued of ${i.queue_capacity}`)},
      {label: 'Tenant', cell: (i) => h('div', {}, h('div', {}, i.tenant_id || 'shared'), h('div', {class: 'sub'}, i.isolation_mode))},
      {label: 'Heartbeat', cell: (i) => h('span', {title: i.last_heartbeat_at}, ago(i.last_heartbeat_at))},
    ], list, {
      rowAttrs: (i) => ({'data-instance': i.runtime_instance_id, 'data-status': i.status}),
      empty: 'No runtime instances yet: capacity starts with the first run.',
    }));
  };
  await refresh();
  every(2000, v.signal, refresh);
}
