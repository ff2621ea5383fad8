/*
 * The status page of lensemble-verifyd. Plain ES2017, no framework.
 *
 * What it costs the daemon: GET /summary and GET /chain once per page
 * view (again only after a `lost` event, or once when the daemon becomes
 * ready), the event stream, and GET /chain?run= for the window of rounds
 * of a run as it scrolls into view, as the user pages, and after events
 * about that run (at most once a second per run). GET /artifact/<hash>
 * when a round is opened.
 *
 * Every string that comes from the daemon is written as text
 * (textContent, createTextNode, attribute values), never parsed as HTML.
 */
(function () {
  'use strict';

  var WINDOW = 500;            // rounds of a run drawn at once
  var SLACK = 50;              // room above the newest known round
  var REFRESH_MS = 1000;       // a run's window is read again at most this often
  var PROBLEMS_SHOWN = 20;
  var HEX64 = /^[0-9a-f]{64}$/;

  var STATE_TEXT = {
    trusted: 'trusted',
    verified: 'verified, not trusted',
    failed: 'failed',
    pending: 'pending',
    pruned: 'pruned'
  };
  var BREAK_TEXT = {
    missing_parent: 'its parent is not in the store and not remembered',
    parent_failed: 'no copy of its parent verifies',
    round_gap: "its parent's round is not its round minus one",
    detached_root: 'it names no parent above round 0',
    commitment_mismatch: 'a trusted commitment names another hash for its round',
    cross_run: "its parent is in another run"
  };

  // Every commitment source the daemon names (GET /chain, the status
  // object's commitment, the commitment events).
  var SOURCE_TEXT = {
    signed: 'signed statement',
    ledger: 'ledger record',
    roundclose: 'RoundClose posted',
    pinned: 'pinned in the configuration',
    oms: 'OMS bundle'
  };

  function sourceText(source) {
    return SOURCE_TEXT[source] || String(source);
  }

  var app = {
    loaded: false,
    queue: [],                 // events that came before the first load ended
    runs: new Map(),           // run name -> run
    alerts: new Map(),         // "kind\nsubject" -> alert
    alertsTotal: 0,
    chainEquiv: new Set(),     // "run\nround" of artifacts, from /chain
    forkParents: new Map(),    // parent hash -> children, from /chain
    ledgers: [],
    selected: null,            // the mark whose details are open
    observer: null,
    readyTimer: null,
    events: null
  };

  /* ---- small helpers ---------------------------------------------------- */

  function $(id) { return document.getElementById(id); }

  // el('p', {className: 'x', text: 'y', attrs: {...}}, child...): strings become text nodes.
  function el(tag, opts) {
    var e = document.createElement(tag);
    var i, c, k;
    opts = opts || {};
    if (opts.className) e.className = opts.className;
    if (opts.text !== undefined && opts.text !== null) e.textContent = String(opts.text);
    if (opts.attrs) for (k in opts.attrs) e.setAttribute(k, String(opts.attrs[k]));
    for (i = 2; i < arguments.length; i++) {
      c = arguments[i];
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }

  function short(h) {
    return typeof h === 'string' && h.length > 12 ? h.slice(0, 12) + '…' : String(h);
  }

  function hashEl(h) {
    if (h === null || h === undefined) return el('span', { text: 'none' });
    return el('code', { className: 'hash', text: short(h), attrs: { title: String(h) } });
  }

  function runLabel(run) { return run === '.' ? '. (the store root)' : run; }

  function fetchJSON(url) {
    return fetch(url, { headers: { Accept: 'application/json' }, cache: 'no-store' })
      .then(function (r) {
        if (!r.ok) throw new Error(url + ' answered ' + r.status);
        return r.json();
      });
  }

  function showError(msg) {
    var p = $('load-error');
    p.textContent = msg;
    p.hidden = false;
  }

  // The run of an artifact's path: the directory holding it.
  function runOfPath(path) {
    var i = typeof path === 'string' ? path.lastIndexOf('/') : -1;
    return i > 0 ? path.slice(0, i) : '.';
  }

  /* ---- the daemon and its alerts ----------------------------------------- */

  function renderSummary(s) {
    var keys = $('trusted-keys');
    $('version').textContent = s.version;
    $('ready').textContent = s.ready ? 'ready' : 'not ready: ' + s.not_ready;
    $('ready').className = s.ready ? 'ok' : 'bad';
    $('policy').textContent = s.commitment_policy;
    $('legacy').textContent = s.legacy_policy;
    $('signing-key').textContent = s.signing_key_id;
    keys.replaceChildren();
    if (s.trusted_keys.length === 0) keys.appendChild(el('li', { text: 'none' }));
    s.trusted_keys.forEach(function (k) { keys.appendChild(el('li', {}, el('code', { className: 'hash', text: k }))); });
    app.alerts.clear();
    s.alerts.forEach(function (a) { app.alerts.set(a.kind + '\n' + a.subject, a); });
    app.alertsTotal = s.alerts_total;
    renderAlerts();
  }

  function renderAlerts() {
    var list = $('alert-list');
    var n = app.alerts.size;
    var more = app.alertsTotal - n;
    list.replaceChildren();
    app.alerts.forEach(function (a) {
      list.appendChild(el('li', { className: 'alert', attrs: { 'data-kind': a.kind } },
        el('strong', { className: 'kind', text: a.kind }), ' ',
        el('span', { className: 'subject', text: a.subject }),
        el('span', { className: 'detail', text: a.detail })));
    });
    if (more > 0)
      list.appendChild(el('li', { text: more + ' more raised: GET /alerts?active=1 lists them all' }));
    $('no-alerts').hidden = n > 0;
    $('alert-count').textContent = n > 0 ? '(' + Math.max(n, app.alertsTotal) + ')' : '';
  }

  function onAlert(d) {
    var key = d.kind + '\n' + d.subject;
    var had = app.alerts.has(key);
    if (d.state === 'raised') {
      app.alerts.set(key, { kind: d.kind, subject: d.subject, detail: d.detail });
      if (!had) app.alertsTotal++;
    } else if (d.state === 'cleared') {
      app.alerts.delete(key);
      if (had) app.alertsTotal = Math.max(0, app.alertsTotal - 1);
    }
    renderAlerts();
    renderLedgers();
    app.runs.forEach(function (run) { if (run.page) drawWindow(run); });
  }

  // What the alerts say of artifacts: the rounds under equivocation
  // ("run\nround" of the artifacts), where chains break and why, and why
  // copies failed (hash -> text).
  function alertFacts() {
    var f = { equiv: new Set(), breaks: new Map(), failed: new Map() };
    var m;
    app.alerts.forEach(function (a) {
      if (a.kind === 'equivocation' && (m = /^(.*) round (\d+)$/.exec(a.subject)))
        f.equiv.add(m[1] + '\n' + (Number(m[2]) + 1));
      else if (a.kind === 'chain_broken' && (m = /: ([a-z_]+) at ([0-9a-f]{64})$/.exec(a.detail)))
        f.breaks.set(m[2], m[1]);
      else if (a.kind === 'artifact_failed' && (m = /\(claims ([0-9a-f]{64})\): ([a-z_]+):/.exec(a.detail)))
        f.failed.set(m[1], m[2] + ' (' + a.subject + ')');
    });
    return f;
  }

  /* ---- ledgers and forks (from the one GET /chain) ------------------------- */

  function renderLedgers() {
    var body = $('ledger-rows');
    body.replaceChildren();
    if (app.ledgers.length === 0)
      body.appendChild(el('tr', {}, el('td', { text: 'no ledger in the store', attrs: { colspan: 6 } })));
    app.ledgers.forEach(function (l) {
      var rewritten = app.alerts.get('ledger_rewritten\n' + l.path);
      var broken = app.alerts.get('ledger_broken\n' + l.path);
      var brk = l.first_break;
      var chain = l.chain_valid && !broken ? 'valid' : 'broken' +
        (broken ? ': ' + broken.detail : brk ? ': ' + brk.reason + (brk.line ? ' at line ' + brk.line : '') : '');
      body.appendChild(el('tr', { className: rewritten || chain !== 'valid' ? 'bad' : '' },
        el('td', {}, el('code', { text: l.path })),
        el('td', { text: runLabel(l.run) }),
        el('td', { text: l.records }),
        el('td', { text: l.trusted_records }),
        el('td', { text: chain }),
        el('td', { text: rewritten ? 'REWRITTEN: ' + rewritten.detail : 'no' })));
    });
  }

  function renderForks(forks) {
    var list = $('fork-list');
    list.replaceChildren();
    app.forkParents.clear();
    forks.forEach(function (f) {
      app.forkParents.set(f.parent, f.children);
      var li = el('li', {}, el('span', { className: 'tag t-fork', text: 'fork' }), ' ', hashEl(f.parent), ' has ' + f.children.length + ' children: ');
      f.children.forEach(function (c) { li.appendChild(hashEl(c)); li.appendChild(document.createTextNode(' ')); });
      list.appendChild(li);
    });
    $('no-forks').hidden = forks.length > 0;
  }

  /* ---- runs --------------------------------------------------------------- */

  // The committed head of each run: the highest round a counting
  // commitment names (the artifact of round t + 1 for a commitment of t).
  function committedHeads(commitments) {
    var heads = new Map();
    var equiv = new Map();
    commitments.forEach(function (c) {
      if (!c.counts || c.round_index === null || c.source === 'pinned') return;
      var round = c.round_index + 1;
      noteCommitted(heads, c.run, round, c.global_model_hash, c.source);
      var k = c.run + '\n' + round;
      var seen = equiv.get(k) || new Set();
      seen.add(c.global_model_hash);
      equiv.set(k, seen);
    });
    app.chainEquiv.clear();
    equiv.forEach(function (hashes, k) { if (hashes.size > 1) app.chainEquiv.add(k); });
    return heads;
  }

  // The highest committed round of a run; two hashes for it: equivocal.
  function noteCommitted(heads, run, round, hash, source) {
    var h = heads.get(run);
    if (h && round === h.round_index && hash !== h.content_hash) h.equivocal = true;
    else if (!h || round > h.round_index) heads.set(run, { round_index: round, content_hash: hash, source: source, equivocal: false });
  }

  function newRun(name) {
    var run = {
      name: name, trustedHead: null, committedHead: null, tips: [], top: -1,
      after: null, page: null, loading: false, timer: null, lastRead: 0, focusRound: null,
      renderedMs: null
    };
    run.section = el('section', { className: 'run', attrs: { 'data-run': name, 'aria-label': 'run ' + name } });
    run.title = el('h3', {}, 'Run ', el('span', { className: 'runname', text: runLabel(name) }));
    run.facts = el('dl', { className: 'facts' });
    run.range = el('span', { className: 'range', text: 'not read yet' });
    run.buttons = {};
    run.nav = el('nav', { className: 'pager', attrs: { 'aria-label': 'rounds of run ' + name } });
    [['first', '« First'], ['older', '‹ Older'], ['newer', 'Newer ›'], ['latest', 'Latest »']].forEach(function (b) {
      var btn = el('button', { text: b[1], attrs: { type: 'button', 'data-page': b[0] } });
      btn.addEventListener('click', function () { pageRun(run, b[0]); });
      run.buttons[b[0]] = btn;
      run.nav.appendChild(btn);
    });
    run.nav.appendChild(run.range);
    run.chain = el('ol', { className: 'chain', attrs: { 'aria-label': 'chain of run ' + name } });
    run.chain.addEventListener('click', onMarkClick);
    run.chain.addEventListener('keydown', onChainKey);
    run.problems = el('ul', { className: 'problems' });
    run.section.append(run.title, run.facts, run.nav, run.chain, run.problems);
    app.runs.set(name, run);
    return run;
  }

  function noteTop(run, round) {
    if (typeof round === 'number' && round > run.top) run.top = round;
  }

  function renderRunFacts(run) {
    var f = run.facts;
    var t = run.trustedHead, c = run.committedHead;
    f.replaceChildren(
      el('dt', { text: 'Committed head' }),
      c && c.equivocal ? el('dd', { className: 'bad' }, 'round ' + c.round_index + ': two hashes committed (equivocation)') :
        el('dd', {}, c ? 'round ' + c.round_index + ' ' : 'none', c ? hashEl(c.content_hash) : null, c && c.source ? ' (' + sourceText(c.source) + ')' : ''),
      el('dt', { text: 'Trusted head' }),
      el('dd', { className: t ? '' : 'bad' }, t ? 'round ' + t.round_index + ' ' : 'none', t ? hashEl(t.content_hash) : null));
    if (run.tips.length > 1) {
      var dd = el('dd');
      run.tips.forEach(function (h) { dd.append('round ' + h.round_index + ' ', hashEl(h.content_hash), ' '); });
      f.append(el('dt', { text: 'Verified tips' }), dd);
    }
    f.querySelectorAll('dd').forEach(function (d, i) { d.setAttribute('data-fact', ['committed', 'trusted', 'tips'][i]); });
  }

  function buildRuns(chain) {
    var heads = committedHeads(chain.commitments || []);
    var box = $('runs');
    var names = chain.runs.map(function (r) { return r.run; });
    app.runs.forEach(function (run, name) { if (names.indexOf(name) < 0) { run.section.remove(); app.runs.delete(name); } });
    chain.runs.forEach(function (r) {
      var run = app.runs.get(r.run) || newRun(r.run);
      run.trustedHead = r.committed_head;
      run.committedHead = heads.get(r.run) || null;
      run.tips = r.heads || [];
      if (run.trustedHead) noteTop(run, run.trustedHead.round_index);
      if (run.committedHead) noteTop(run, run.committedHead.round_index);
      run.tips.forEach(function (h) { noteTop(run, h.round_index); });
      renderRunFacts(run);
      box.appendChild(run.section);
      if (run.page) readWindow(run);
      else watchRun(run);
    });
    if (chain.runs.length === 0) box.replaceChildren(el('p', { text: 'The store holds no run yet.' }));
  }

  // A run's window is read when its section comes into view.
  function watchRun(run) {
    if (!app.observer) { readWindow(run); return; }
    app.observer.observe(run.section);
  }

  function onVisible(entries) {
    entries.forEach(function (e) {
      if (!e.isIntersecting) return;
      app.observer.unobserve(e.target);
      var run = app.runs.get(e.target.getAttribute('data-run'));
      if (run && !run.page && !run.loading) readWindow(run);
    });
  }

  function latestAfter(run) { return Math.max(-1, run.top - (WINDOW - SLACK)); }

  function readWindow(run) {
    if (run.after === null) run.after = latestAfter(run);
    var url = '/chain?run=' + encodeURIComponent(run.name) + '&limit=' + WINDOW +
      (run.after >= 0 ? '&after=' + run.after : '');
    run.loading = true;
    run.lastRead = Date.now();
    return fetchJSON(url).then(function (page) {
      run.loading = false;
      run.page = page;
      if (page.committed_head) run.trustedHead = page.committed_head;
      page.artifacts.forEach(function (a) { noteTop(run, a.round_index); });
      renderRunFacts(run);
      drawWindow(run);
      if (run.renderedMs === null) {
        run.renderedMs = performance.now();
        run.section.setAttribute('data-rendered-ms', run.renderedMs.toFixed(1));
      }
    }).catch(function (err) {
      run.loading = false;
      showError('Reading run ' + run.name + ': ' + err.message);
    });
  }

  function pageRun(run, how) {
    var p = run.page;
    if (how === 'first') run.after = -1;
    else if (how === 'older') run.after = Math.max(-1, run.after - WINDOW);
    else if (how === 'newer' && p && p.next !== null) run.after = p.next;
    else if (how === 'latest') run.after = latestAfter(run);
    run.focusRound = null;
    readWindow(run);
  }

  // Events name a run: its window is read again soon, not once per event.
  function refreshRun(name) {
    var run = app.runs.get(name);
    if (!run) {
      run = newRun(name);
      renderRunFacts(run);
      $('runs').appendChild(run.section);
      watchRun(run);
      return;
    }
    if (!run.page || run.timer) return;
    var wait = Math.max(100, REFRESH_MS - (Date.now() - run.lastRead));
    run.timer = setTimeout(function () { run.timer = null; readWindow(run); }, wait);
  }

  /* ---- the picture ---------------------------------------------------------- */

  function markState(a) {
    if (a.trusted) return 'trusted';
    if (a.state === 'failed') return 'failed';
    if (a.state === 'verified') return 'verified';
    return 'pending';
  }

  // The rounds of a page: round -> [item], in round order.
  function roundsOf(page) {
    var rounds = new Map();
    function add(item) {
      var list = rounds.get(item.round) || [];
      list.push(item);
      rounds.set(item.round, list);
    }
    page.artifacts.forEach(function (a) {
      add({ round: a.round_index, hash: a.content_hash, parent: a.parent_hash, state: markState(a), chain: a.chain.status });
    });
    (page.pruned || []).forEach(function (p) {
      add({ round: p.round_index, hash: p.content_hash, parent: p.parent_hash, state: 'pruned', chain: 'intact', verifiedAt: p.verified_at });
    });
    return new Map(Array.from(rounds.entries()).sort(function (a, b) { return a[0] - b[0]; }));
  }

  // Where a chain breaks: the alerts say it (and why) for the verified
  // artifacts; else an artifact whose chain is broken while its parent's
  // is not (or whose parent failed or is not in the window).
  function breakOf(item, byHash, facts) {
    if (facts.breaks.has(item.hash)) return facts.breaks.get(item.hash);
    if (item.chain !== 'broken') return null;
    var p = item.parent ? byHash.get(item.parent) : null;
    if (p && p.chain === 'broken' && p.state !== 'failed') return null;
    return 'broken';
  }

  function describe(item, tags) {
    var s = 'round ' + item.round + ', ' + STATE_TEXT[item.state];
    if (item.chain === 'broken') s += ', chain broken';
    if (tags.length) s += ', ' + tags.join(', ');
    return s + ', ' + item.hash;
  }

  function drawWindow(run) {
    var page = run.page;
    var facts = alertFacts();
    var rounds = roundsOf(page);
    var byHash = new Map();
    var problems = [];
    var frag = document.createDocumentFragment();
    var first = null, last = null, focusable = null;
    rounds.forEach(function (items) { items.forEach(function (it) { byHash.set(it.hash, it); }); });
    rounds.forEach(function (items, round) {
      var li = el('li', { className: 'round', attrs: { 'data-round': round } });
      var equiv = facts.equiv.has(run.name + '\n' + round) || app.chainEquiv.has(run.name + '\n' + round);
      var fork = items.length > 1 || items.some(function (it) { return it.parent && app.forkParents.has(it.parent); });
      var brk = null;
      if (first === null) first = round;
      last = round;
      if (round % 10 === 0) li.setAttribute('data-tick', round);
      items.forEach(function (it) {
        var tags = [];
        var b = breakOf(it, byHash, facts);
        if (b) { brk = brk || b; tags.push('break' + (b !== 'broken' ? ': ' + b : '')); }
        if (fork) tags.push('fork');
        if (equiv) tags.push('equivocation');
        if (it.state === 'failed') {
          problems.push(['failed', round, it.hash, 'failed' + (facts.failed.has(it.hash) ? ': ' + facts.failed.get(it.hash) : '')]);
        }
        if (b) problems.push(['break', round, it.hash, 'chain breaks here' + (b !== 'broken' ? ': ' + b + ' (' + (BREAK_TEXT[b] || b) + ')' : '')]);
        var m = el('button', {
          className: 'mark s-' + it.state + (it.chain === 'broken' ? ' broken' : ''),
          attrs: {
            type: 'button', tabindex: -1, 'data-run': run.name, 'data-round': round,
            'data-hash': it.hash, 'data-state': it.state, 'aria-label': describe(it, tags), title: describe(it, tags)
          }
        });
        if (it.verifiedAt) m.setAttribute('data-verified-at', it.verifiedAt);
        if (run.focusRound === round && !focusable) focusable = m;
        li.appendChild(m);
      });
      if (brk) { li.classList.add('break-before'); li.appendChild(el('span', { className: 'tag t-break', text: 'break' })); }
      if (fork) { li.classList.add('forked'); li.appendChild(el('span', { className: 'tag t-fork', text: 'fork' })); problems.push(['fork', round, null, items.length + ' artifacts for this round']); }
      if (equiv) { li.appendChild(el('span', { className: 'tag t-equivocation', text: 'equivocation' })); problems.push(['equivocation', round, null, 'commitments name two hashes for this round: none of its artifacts is trusted']); }
      frag.appendChild(li);
    });
    run.chain.replaceChildren(frag);
    var all = run.chain.querySelectorAll('.mark');
    if (all.length) (focusable || all[all.length - 1]).setAttribute('tabindex', '0');
    if (all.length === 0) run.chain.appendChild(el('li', { className: 'empty', text: 'no artifact in these rounds' }));
    run.range.textContent = first === null ? 'no rounds' : 'rounds ' + first + '–' + last + (run.top > last ? ' of ' + run.top : '');
    run.buttons.first.disabled = run.after < 0;
    run.buttons.older.disabled = run.after < 0;
    run.buttons.newer.disabled = page.next === null;
    run.buttons.latest.disabled = page.next === null && run.after === latestAfter(run);
    drawProblems(run, problems);
    markSelected();
  }

  function drawProblems(run, problems) {
    var ul = run.problems;
    ul.replaceChildren();
    problems.slice(0, PROBLEMS_SHOWN).forEach(function (p) {
      ul.appendChild(el('li', { attrs: { 'data-problem': p[0] } },
        el('span', { className: 'tag t-' + (p[0] === 'failed' ? 'failed' : p[0]), text: p[0] }),
        ' round ' + p[1] + (p[2] ? ' ' : ''), p[2] ? hashEl(p[2]) : null, ': ' + p[3]));
    });
    if (problems.length > PROBLEMS_SHOWN)
      ul.appendChild(el('li', { text: (problems.length - PROBLEMS_SHOWN) + ' more in these rounds' }));
  }

  /* ---- keyboard and selection --------------------------------------------- */

  function onChainKey(e) {
    var marks = Array.prototype.slice.call(e.currentTarget.querySelectorAll('.mark'));
    var i = marks.indexOf(document.activeElement);
    var j = -1;
    if (i < 0) return;
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown') j = Math.min(marks.length - 1, i + 1);
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') j = Math.max(0, i - 1);
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = marks.length - 1;
    else return;
    e.preventDefault();
    marks[i].setAttribute('tabindex', '-1');
    marks[j].setAttribute('tabindex', '0');
    marks[j].focus();
  }

  function onMarkClick(e) {
    var m = e.target.closest('.mark');
    if (!m) return;
    var run = app.runs.get(m.getAttribute('data-run'));
    if (run) {
      run.focusRound = Number(m.getAttribute('data-round'));
      run.chain.querySelectorAll('.mark[tabindex="0"]').forEach(function (x) { x.setAttribute('tabindex', '-1'); });
    }
    m.setAttribute('tabindex', '0');
    openDetails({ run: m.getAttribute('data-run'), round: m.getAttribute('data-round'), hash: m.getAttribute('data-hash'),
      state: m.getAttribute('data-state'), verifiedAt: m.getAttribute('data-verified-at') }, true);
  }

  function markSelected() {
    document.querySelectorAll('.mark.selected').forEach(function (m) { m.classList.remove('selected'); });
    if (!app.selected) return;
    document.querySelectorAll('.mark[data-hash="' + app.selected.hash + '"]').forEach(function (m) {
      if (m.getAttribute('data-run') === app.selected.run) m.classList.add('selected');
    });
  }

  /* ---- details of one round ------------------------------------------------ */

  function row(dl, name, value) {
    if (value === undefined) return;
    var dd = el('dd');
    if (value === null) dd.textContent = '—';
    else if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = String(value);
    dl.append(el('dt', { text: name }), dd);
  }

  function yesNo(v) { return v === true ? 'yes' : v === false ? 'no' : v; }

  function openDetails(sel, focus) {
    if (!HEX64.test(sel.hash)) return;
    app.selected = sel;
    markSelected();
    var panel = $('details');
    var body = $('details-body');
    panel.hidden = false;
    $('details-h').textContent = 'Round ' + sel.round + ' of run ' + runLabel(sel.run);
    if (sel.state === 'pruned') {
      body.replaceChildren(prunedView(sel));
      if (focus) $('details-h').focus();
      return;
    }
    if (focus) body.replaceChildren(el('p', { text: 'Reading /artifact/' + sel.hash + '…' }));
    fetchJSON('/artifact/' + sel.hash).then(function (st) {
      if (app.selected !== sel) return;
      body.replaceChildren(statusView(st));
      panel.setAttribute('data-hash', sel.hash);
      panel.setAttribute('data-state', st.state);
      if (focus) $('details-h').focus();
    }).catch(function (err) {
      body.replaceChildren(el('p', { className: 'bad', text: err.message }));
    });
  }

  function prunedView(sel) {
    var dl = el('dl', { className: 'facts' });
    row(dl, 'Content hash', el('code', { className: 'hash', text: sel.hash }));
    row(dl, 'State', 'pruned: verified and committed, then its directory was removed; the chains above pass through what the daemon remembers of it');
    row(dl, 'Verified at', sel.verifiedAt || null);
    return dl;
  }

  function statusView(st) {
    var box = el('div', { className: 'status' });
    var dl = el('dl', { className: 'facts' });
    var h = st.header || {};
    row(dl, 'Content hash', el('code', { className: 'hash', text: st.content_hash }));
    row(dl, 'State', st.state);
    row(dl, 'Trusted', st.trusted ? 'yes' : 'no' + (st.untrusted_reason ? ': ' + st.untrusted_reason : ''));
    if (st.state === 'failed') row(dl, 'Failure', st.code + ': ' + st.detail);
    row(dl, 'Round', h.round_index);
    row(dl, 'Parent', h.parent_hash === null ? null : el('code', { className: 'hash', text: h.parent_hash }));
    row(dl, 'Created', h.created_at);
    row(dl, 'Schema version', h.schema_version);
    if (st.legacy) row(dl, 'Legacy', 'migrated from schema version ' + st.migrated_from);
    row(dl, 'Tensors', st.tensors);
    row(dl, 'Bytes', st.bytes);
    box.appendChild(dl);
    box.appendChild(commitmentView(st.commitment));
    box.appendChild(chainView(st.chain));
    box.appendChild(copiesView(st.copies || []));
    var links = el('p', { className: 'links' },
      el('a', { text: 'Status object (JSON)', attrs: { href: '/artifact/' + st.content_hash } }), ' · ',
      el('a', { text: 'Signed attestation', attrs: { href: '/artifact/' + st.content_hash + '/attestation', 'data-link': 'attestation' } }),
      st.state === 'verified' ? '' : ' (given once the artifact is verified)');
    box.appendChild(links);
    return box;
  }

  function commitmentView(c) {
    var sec = el('section', { className: 'commitment' }, el('h3', { text: 'Commitment' }));
    if (!c) { sec.appendChild(el('p', { text: 'None: nothing names a hash for this round.' })); return sec; }
    var dl = el('dl', { className: 'facts' });
    row(dl, 'Source', sourceText(c.source) + ' (' + c.source + ')' + (c.signed ? ', signed' : ''));
    row(dl, 'Where', c.where + (c.line !== undefined ? ', line ' + c.line : ''));
    row(dl, 'Committed round', c.round_index !== null ? c.round_index :
      c.source === 'pinned' ? 'none (a pin)' : 'none (the genesis)');
    row(dl, 'Names', el('code', { className: 'hash', text: c.global_model_hash }));
    row(dl, 'Matches', yesNo(c.matches));
    if (c.key_id) row(dl, 'Key', el('code', { className: 'hash', text: c.key_id }));
    if (c.equivocation) row(dl, 'Equivocation', 'yes: two hashes are named for this round');
    sec.appendChild(dl);
    return sec;
  }

  function chainView(ch) {
    var sec = el('section', { className: 'chainfacts' }, el('h3', { text: 'Chain' }));
    var dl = el('dl', { className: 'facts' });
    ch = ch || {};
    row(dl, 'Status', ch.status);
    row(dl, 'Length', ch.length);
    row(dl, 'Pruned links', ch.pruned);
    row(dl, 'Root', ch.root ? el('code', { className: 'hash', text: ch.root }) : null);
    sec.appendChild(dl);
    if (ch.breaks && ch.breaks.length) {
      var ul = el('ul', { className: 'breaks' });
      ch.breaks.forEach(function (b) {
        ul.appendChild(el('li', { attrs: { 'data-reason': b.reason } },
          el('strong', { text: b.reason }), ' at round ' + b.round_index + ' ', hashEl(b.content_hash),
          ': ' + (BREAK_TEXT[b.reason] || '')));
      });
      sec.append(el('h4', { text: 'Breaks' }), ul);
      if (ch.breaks_not_listed) sec.appendChild(el('p', { text: ch.breaks_not_listed + ' more not listed' }));
    }
    return sec;
  }

  function copiesView(copies) {
    var sec = el('section', { className: 'copies' }, el('h3', { text: 'Copies (' + copies.length + ')' }));
    copies.forEach(function (c) {
      var dl = el('dl', { className: 'facts copy' + (c.state === 'failed' ? ' bad' : '') });
      row(dl, 'Path', el('code', { className: 'path', text: c.path }));
      row(dl, 'Kind', c.kind);
      row(dl, 'State', c.state);
      row(dl, 'Trusted', yesNo(c.trusted));
      if (c.code) row(dl, 'Code', c.code);
      if (c.detail) row(dl, 'Detail', c.detail);
      if (c.remediation) row(dl, 'What to do', el('strong', { className: 'remediation', text: c.remediation }));
      if (c.recomputed_hash) row(dl, 'Bytes hash to', el('code', { className: 'hash', text: c.recomputed_hash }));
      if (c.expected_hash) row(dl, 'Expected', el('code', { className: 'hash', text: c.expected_hash }));
      if (c.file) row(dl, 'File', c.file);
      if (c.tensor) row(dl, 'Tensor', c.tensor);
      row(dl, 'Verified at', c.verified_at);
      if (typeof c.duration_ms === 'number') row(dl, 'Took', c.duration_ms.toFixed(c.duration_ms < 10 ? 3 : 0) + ' ms');
      sec.appendChild(dl);
    });
    return sec;
  }

  function closeDetails() {
    var sel = app.selected;
    app.selected = null;
    markSelected();
    $('details').hidden = true;
    if (!sel) return;
    var run = app.runs.get(sel.run);
    var m = run && run.chain.querySelector('.mark[tabindex="0"]');
    if (m) m.focus();
  }

  /* ---- events --------------------------------------------------------------- */

  function setLive(text, on) {
    $('live').textContent = text;
    $('live').className = 'live' + (on ? ' on' : '');
    document.body.setAttribute('data-live', on ? '1' : '0');
  }

  function applyEvent(type, d) {
    var run;
    if (type === 'alert') onAlert(d);
    else if (type === 'head') {
      run = app.runs.get(d.run);
      if (run) { run.trustedHead = { round_index: d.round_index, content_hash: d.content_hash }; noteTop(run, d.round_index); renderRunFacts(run); }
      refreshRun(d.run);
    } else if (type === 'commitment') {
      run = app.runs.get(d.run);
      if (run && d.round_index !== null) {
        var heads = new Map(run.committedHead ? [[d.run, run.committedHead]] : []);
        noteCommitted(heads, d.run, d.round_index + 1, d.content_hash, d.source);
        run.committedHead = heads.get(d.run);
        noteTop(run, d.round_index + 1);
        renderRunFacts(run);
      }
      refreshRun(d.run);
    } else if (type === 'verdict') {
      refreshRun(runOfPath(d.path));
      if (app.selected && app.selected.hash === d.content_hash) openDetails(app.selected, false);
    } else if (type === 'lost') {
      load();
    }
  }

  function onEvent(type, e) {
    var d;
    try { d = JSON.parse(e.data); } catch (err) { return; }
    if (!app.loaded) app.queue.push([type, d]);
    else applyEvent(type, d);
  }

  function startEvents() {
    if (app.events || typeof EventSource === 'undefined') return;
    var es = new EventSource('/events');
    app.events = es;
    es.onopen = function () { setLive('live: updates as the daemon learns', true); };
    es.onerror = function () { setLive('reconnecting to /events…', false); };
    ['verdict', 'head', 'commitment', 'alert', 'lost'].forEach(function (t) {
      es.addEventListener(t, function (e) { onEvent(t, e); });
    });
  }

  /* ---- loading ---------------------------------------------------------------- */

  // Not ready: the picture would be partial. /summary (never /chain) is
  // asked again until it is, then the page is read once more.
  function waitReady(s) {
    if (s.ready || app.readyTimer) return;
    app.readyTimer = setTimeout(function () {
      app.readyTimer = null;
      fetchJSON('/summary').then(function (n) {
        if (n.ready) load(); else waitReady(n);
      }).catch(function () { waitReady(s); });
    }, 5000);
  }

  function load() {
    app.loaded = false;
    startEvents();
    return Promise.all([fetchJSON('/summary'), fetchJSON('/chain')]).then(function (r) {
      renderSummary(r[0]);
      app.ledgers = r[1].ledgers || [];
      renderForks(r[1].forks || []);
      renderLedgers();
      buildRuns(r[1]);
      app.loaded = true;
      document.body.setAttribute('data-loaded', '1');
      app.queue.splice(0).forEach(function (q) { applyEvent(q[0], q[1]); });
      waitReady(r[0]);
    }).catch(function (err) {
      showError('The daemon could not be read: ' + err.message + '. Reload to try again.');
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    if (typeof IntersectionObserver !== 'undefined')
      app.observer = new IntersectionObserver(onVisible, { rootMargin: '200px' });
    $('details-close').addEventListener('click', closeDetails);
    document.addEventListener('keydown', function (e) {
      if (e.key === 'Escape' && app.selected) closeDetails();
    });
    load();
  });
}());
