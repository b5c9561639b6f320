# compare-peers' report: medians over the repetitions, and the side-by-side tables.
# Input (results.tsv): contender, np, size in bytes, value, repetition; the value is the time of
# one allreduce in us, except ucx-tag_bw (link bandwidth, GB/s), ucx-tag_lat (one-way latency
# of one message, us) and iperf3-bidir (size 0: GB/s each way with both directions busy). Writes dir/medians.tsv and dir/data/CONTENDER-npN.dat (size, busbw or
# GB/s) for the plot, and prints the tables. Variables: dir, reps.
BEGIN {
  FS = OFS = "\t"
  nar = split("hc-perf mpi-ob1-tcp mpi-ucx gloo-ring", ar, " ")
}

{
  key = $1 SUBSEP $2 SUBSEP $3
  count[key]++
  val[key, count[key]] = $4
  if ($1 == "iperf3-bidir") next  # one figure, not a size
  if (!($3 in seenSize)) { seenSize[$3] = 1; sizes[++nsizes] = $3 + 0 }
  if ($1 != "ucx-tag_bw" && $1 != "ucx-tag_lat" && !($2 in seenNp)) { seenNp[$2] = 1; nps[++nnps] = $2 + 0 }
}

function sortNumbers(a, n,   i, j, t) {
  for (i = 2; i <= n; i++) {
    t = a[i]
    for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
    a[j + 1] = t
  }
}

function median(key,   a, i, m) {
  m = count[key]
  for (i = 1; i <= m; i++) a[i] = val[key, i]
  sortNumbers(a, m)
  return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}

# nccl-tests: algbw = size / time; allreduce busbw = algbw * 2(n-1)/n; GB/s = 1e9 B/s.
function busbw(size, us, np) { return size / (us * 1e3) * 2 * (np - 1) / np }

function human(s) {
  if (s >= 1073741824 && s % 1073741824 == 0) return s / 1073741824 " GiB"
  if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MiB"
  if (s >= 1024 && s % 1024 == 0) return s / 1024 " KiB"
  return s " B"
}

function cell(x, fmt) { return x == "" ? sprintf("%9s", "-") : sprintf(fmt, x) }
function ratio(a, b) { return (a == "" || b == "" || b <= 0) ? "" : a / b }

END {
  sortNumbers(sizes, nsizes)
  sortNumbers(nps, nnps)
  medians = dir "/medians.tsv"
  print "contender", "np", "size", "median", "busbw_GBs" > medians
  for (p = 1; p <= nnps; p++) {
    np = nps[p]
    for (s = 1; s <= nsizes; s++) {
      size = sizes[s]
      for (c = 1; c <= nar; c++) {
        key = ar[c] SUBSEP np SUBSEP size
        if (!(key in count)) continue
        t = median(key)
        time[ar[c], np, size] = t
        bw[ar[c], np, size] = busbw(size, t, np)
        print ar[c], np, size, t, bw[ar[c], np, size] > medians
        print size, bw[ar[c], np, size] > (dir "/data/" ar[c] "-np" np ".dat")
      }
    }
  }
  for (s = 1; s <= nsizes; s++) {
    size = sizes[s]
    key = "ucx-tag_bw" SUBSEP 2 SUBSEP size
    if (key in count) {
      link[size] = median(key)
      print "ucx-tag_bw", 2, size, link[size], link[size] > medians
      print size, link[size] > (dir "/data/ucx-tag_bw.dat")
    }
    key = "ucx-tag_lat" SUBSEP 2 SUBSEP size
    if (key in count) {
      lat[size] = median(key)
      print "ucx-tag_lat", 2, size, lat[size], "" > medians
    }
  }

  twoway = ("iperf3-bidir" SUBSEP 2 SUBSEP 0) in count ? median("iperf3-bidir" SUBSEP 2 SUBSEP 0) : ""
  if (twoway != "") print "iperf3-bidir", 2, 0, twoway, twoway > medians
  printf "\nallreduce fp32 sum, busbw GB/s (algbw * 2(n-1)/n), median of %d run(s); " \
         "tag_bw: the UCX link between two processes, GB/s\n", reps
  printf "two-way: iperf3 --bidir, GB/s each way with both directions busy (as a ring uses the " \
         "link): %s\n", twoway == "" ? "-" : sprintf("%.3f", twoway)
  printf "hc/mpi uses the faster Open MPI of the two; a ratio above 1 means hc-perf is ahead\n\n"
  printf "%3s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "np", "size", "hc-perf", "tag_bw",
         "mpi-ob1", "mpi-ucx", "gloo", "hc/tag_bw", "hc/2way", "hc/mpi", "hc/gloo"
  for (p = 1; p <= nnps; p++) {
    np = nps[p]
    for (s = 1; s <= nsizes; s++) {
      size = sizes[s]
      hc = bw["hc-perf", np, size]; ob1 = bw["mpi-ob1-tcp", np, size]
      mu = bw["mpi-ucx", np, size]; gl = bw["gloo-ring", np, size]
      mpi = (ob1 != "" && (mu == "" || ob1 >= mu)) ? ob1 : mu
      printf "%3d %9s %s %s %s %s %s %s %s %s %s\n", np, human(size), cell(hc, "%9.3f"),
             cell(link[size], "%9.3f"), cell(ob1, "%9.3f"), cell(mu, "%9.3f"), cell(gl, "%9.3f"),
             cell(ratio(hc, link[size]), "%9.2f"), cell(ratio(hc, twoway), "%9.2f"),
             cell(ratio(hc, mpi), "%9.2f"), cell(ratio(hc, gl), "%9.2f")
    }
  }

  printf "\ntime of one allreduce, us, median of %d run(s); tag_lat: one-way latency of one " \
         "message\n\n", reps
  printf "%3s %9s %11s %11s %11s %11s %11s\n", "np", "size", "hc-perf", "tag_lat", "mpi-ob1",
         "mpi-ucx", "gloo"
  for (p = 1; p <= nnps; p++) {
    np = nps[p]
    for (s = 1; s <= nsizes; s++) {
      size = sizes[s]
      printf "%3d %9s", np, human(size)
      printf " %11s", time["hc-perf", np, size] == "" ? "-" : sprintf("%.1f", time["hc-perf", np, size])
      printf " %11s", lat[size] == "" ? "-" : sprintf("%.1f", lat[size])
      for (c = 2; c <= nar; c++) {
        t = time[ar[c], np, size]
        printf " %11s", t == "" ? "-" : sprintf("%.1f", t)
      }
      printf "\n"
    }
  }

  # The targets: hc-perf across 2 daemons (one rank each, 4 ranks two each) at 64 and 256 MiB,
  # against the link used both ways at once and the peers of the same run.
  printf "\n"
  for (p = 1; p <= nnps; p++) {
    np = nps[p]
    for (t = 1; t <= 2; t++) {
      target = t == 1 ? 67108864 : 268435456
      hc = bw["hc-perf", np, target]
      if (hc == "" || twoway == "") continue
      best = bw["mpi-ob1-tcp", np, target]
      mu = bw["mpi-ucx", np, target]
      if (mu != "" && (best == "" || mu + 0 > best + 0)) best = mu
      gl = bw["gloo-ring", np, target]
      need = np == 2 ? 0.8 : 0.7
      met = hc >= need * twoway && (best == "" || hc > best) && (gl == "" || hc > gl)
      printf "target, np %d at %s: hc-perf busbw %.3f = %.2f of the two-way %.3f (>= %.2f), " \
             "Open MPI %s, Gloo %s: %s\n", np, human(target), hc, hc / twoway, twoway, need,
             best == "" ? "-" : sprintf("%.3f", best), gl == "" ? "-" : sprintf("%.3f", gl),
             met ? "met" : "NOT met"
    }
  }
}
