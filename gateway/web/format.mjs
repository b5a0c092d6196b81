// The web UI's number formats (app.js, device.mjs): a value that is not a finite number
// shows "—", never NaN or undefined (an older engine's STATS lacks newer fields).
export const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

export const fmt = {
  num(v, digits) { return isNum(v) ? v.toFixed(digits) : '—'; },
  int(v) { return isNum(v) ? Math.round(v).toLocaleString('en-US') : '—'; },
  // Binary units, one decimal past bytes: "12.3 MiB".
  bytes(v) {
    if (!isNum(v)) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 1 : 0) + ' ' + u[i];
  },
  secs(s) {
    if (!isNum(s)) return '—';
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return (d ? d + 'd ' : '') + (d || h ? h + 'h ' : '') + (d || h || m ? m + 'm ' : '') + (s % 60) + 's';
  },
};
