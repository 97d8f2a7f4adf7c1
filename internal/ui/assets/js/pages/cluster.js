// cluster.js: the cluster members as the answering node sees them; a node started without
// membership (dair dev) answers 404 and the page says "single node".

import {h, clear, table, every, isAbort} from '../dom.js';
import {get} from '../api.js';
import {errorBox, pageHeader, liveDot} from '../view.js';

export async function render(v) {
  const live = liveDot('live');
  v.main.append(pageHeader('Cluster', live));
  const body = h('div', {id: 'cluster-body'});
  v.main.append(body);
  let stop = false;
  const refresh = async () => {
    if (stop) return;
    let res;
    try {
      res = await get('/v1/cluster/members', v.signal);
    } catch (e) {
      if (isAbort(e)) throw e;
      stop = true;
      live.set('stopped');
      if (e.status === 404) {
        clear(body).append(h('div', {class: 'panel single-node'},
          h('strong', {}, 'Single node'),
          h('p', {}, 'This node is not a cluster member: it keeps its state in its embedded store and runs every role itself. ' +
            'Start nodes with "dair node --store redis://… --join …" to form a cluster.')));
        return;
      }
      clear(body).append(errorBox(e));
      return;
    }
    const members = res.members || [];
    const t = table([
      {label: 'Member', cell: (m) => h('span', {class: 'mono'}, m.id, m.id === res.self ? h('span', {class: 'chip'}, 'this node') : null)},
      {label: 'Node', cell: (m) => m.node_id},
      {label: 'Address', cell: (m) => h('span', {class: 'mono'}, m.address)},
      {label: 'Roles', cell: (m) => (m.roles || []).map((r) => h('span', {class: 'chip'}, r))},
    ], members, {rowAttrs: (m) => ({'data-member': m.id}), empty: 'No members visible.'});
    clear(body).append(h('p', {class: 'muted'}, `${members.length} member${members.length === 1 ? '' : 's'} alive`), t);
  };
  await refresh();
  every(3000, v.signal, refresh);
}
