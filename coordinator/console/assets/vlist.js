// vlist.js: a virtual list of rows of varying height. Only the rows on
// screen (and a few around them) are in the DOM, so a timeline of 100,000
// frames scrolls as lightly as one of ten. Heights are measured once a row
// is rendered; rows never seen count as the estimate.

export class VList {
  constructor(scroller, { render, estimate = 44, overscan = 6, label = '' }) {
    this.scroller = scroller;
    this.renderRow = render;
    this.estimate = estimate;
    this.overscan = overscan;
    this.count = 0;
    this.heights = new Float64Array(1024);
    this.offsets = new Float64Array(1025);
    this.dirtyFrom = 0;
    this.nodes = new Map(); // index → element
    this.stale = new Set();
    this.sizer = document.createElement('div');
    this.sizer.className = 'vlist-sizer';
    if (label) this.sizer.setAttribute('aria-label', label);
    this.sizer.setAttribute('role', 'list');
    scroller.append(this.sizer);
    this.stick = true;
    this.raf = 0;
    this.autoTop = -1;
    this.onScroll = () => {
      // A scroll the list made itself to follow the end keeps following,
      // even when rows arrived since; the person's own scroll decides.
      if (Math.abs(this.scroller.scrollTop - this.autoTop) > 1) {
        this.stick = this.scroller.scrollTop + this.scroller.clientHeight >= this.total() - 24;
      }
      this.schedule();
    };
    scroller.addEventListener('scroll', this.onScroll, { passive: true });
    this.ro = new ResizeObserver(() => { this.invalidateAll(); });
    this.ro.observe(scroller);
  }

  destroy() {
    cancelAnimationFrame(this.raf);
    this.scroller.removeEventListener('scroll', this.onScroll);
    this.ro.disconnect();
  }

  grow(n) {
    if (n <= this.heights.length) return;
    let cap = this.heights.length;
    while (cap < n) cap *= 2;
    const h = new Float64Array(cap);
    h.set(this.heights);
    h.fill(0, this.heights.length);
    this.heights = h;
    const o = new Float64Array(cap + 1);
    o.set(this.offsets);
    this.offsets = o;
  }

  setCount(n) {
    if (n === this.count) return;
    this.grow(n);
    for (let i = this.count; i < n; i++) this.heights[i] = 0;
    this.dirtyFrom = Math.min(this.dirtyFrom, this.count);
    this.count = n;
    this.schedule();
  }

  // invalidate re-renders row i if it is on screen and re-measures it.
  invalidate(i) {
    if (i < this.count) {
      this.stale.add(i);
      this.schedule();
    }
  }

  invalidateAll() {
    for (const i of this.nodes.keys()) this.stale.add(i);
    this.schedule();
  }

  reset() {
    for (const el of this.nodes.values()) el.remove();
    this.nodes.clear();
    this.count = 0;
    this.dirtyFrom = 0;
    this.schedule();
  }

  height(i) { return this.heights[i] || this.estimate; }

  layoutOffsets() {
    if (this.dirtyFrom > this.count) return;
    let off = this.offsets[this.dirtyFrom];
    for (let i = this.dirtyFrom; i < this.count; i++) {
      this.offsets[i] = off;
      off += this.height(i);
    }
    this.offsets[this.count] = off;
    this.dirtyFrom = this.count + 1;
  }

  total() { this.layoutOffsets(); return this.offsets[this.count]; }

  // first row whose bottom is below y
  find(y) {
    let lo = 0;
    let hi = this.count - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.offsets[mid] + this.height(mid) <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  schedule() {
    if (!this.raf) this.raf = requestAnimationFrame(() => { this.raf = 0; this.paint(); });
  }

  scrollToBottom() {
    this.stick = true;
    this.schedule();
  }

  // paint renders the visible rows; onPainted (if set) is called after.
  paint() {
    for (let pass = 0; pass < 3; pass++) {
      this.layoutOffsets();
      const total = this.offsets[this.count];
      this.sizer.style.height = `${total}px`;
      if (this.stick) {
        this.scroller.scrollTop = Math.max(0, total - this.scroller.clientHeight);
        this.autoTop = this.scroller.scrollTop;
      }
      const top = this.scroller.scrollTop;
      const bottom = top + this.scroller.clientHeight;
      let first = this.count ? this.find(top) : 0;
      let last = first;
      while (last < this.count && this.offsets[last] < bottom) last++;
      first = Math.max(0, first - this.overscan);
      last = Math.min(this.count, last + this.overscan);
      for (const [i, el] of this.nodes) {
        if (i < first || i >= last) {
          el.remove();
          this.nodes.delete(i);
        }
      }
      let changed = false;
      const placed = [];
      for (let i = first; i < last; i++) {
        let el = this.nodes.get(i);
        if (!el || this.stale.has(i)) {
          const fresh = this.renderRow(i);
          fresh.classList.add('vrow');
          fresh.setAttribute('role', 'listitem');
          if (el) el.replaceWith(fresh); else this.sizer.append(fresh);
          el = fresh;
          this.nodes.set(i, el);
          this.stale.delete(i);
        }
        el.style.transform = `translateY(${this.offsets[i]}px)`;
        placed.push([i, el]);
      }
      // Every write first, then every read: one layout per pass, not one
      // per row (a read after a write forces the browser to lay out).
      for (const [i, el] of placed) {
        const hgt = el.offsetHeight;
        if (hgt && hgt !== this.heights[i]) {
          this.heights[i] = hgt;
          this.dirtyFrom = Math.min(this.dirtyFrom, i);
          changed = true;
        }
      }
      this.stale.clear();
      if (!changed) break;
      this.layoutOffsets();
      for (const [i, el] of this.nodes) el.style.transform = `translateY(${this.offsets[i]}px)`;
    }
    if (this.onPainted) this.onPainted();
  }
}
