# Throughput against the cost of one getobs (tools/plots.sh cost): every
# loader at P = 16 on a getobs that sleeps 10 us .. 10 ms, beside 16 plain
# threads calling the same getobs with no hand-off (bare, the most the
# machine allows) and one thread alone.
name = 'cost'
load 'bench/plots/common.gp'
f = dir.'/plots-cost.csv'
P = 16

# How long the shortest sleep really takes here, for the footnote: one
# thread alone, wall time per getobs.
stats sel(f, '$1 == "bare" && $5 == 1 && $4 == 10') using ($10 * 1e3 / $6) \
  nooutput
t10 = STATS_max

# Observations per second of a row, and of the bare threads of its cost.
rate(n, ms) = n / (ms / 1e3)
is(peer, variant) = sprintf('$1 == "%s" && $2 == "%s"', peer, variant)
thr = sel(f, is('eachobs', 'threaded'))
bg = sel(f, is('eachobs', 'background'))
hand = sel(f, '$1 == "handpool"')
tbb = sel(f, '$1 == "tbb"')
bare = sel(f, sprintf('$1 == "bare" && $5 == %d', P))
one = sel(f, '$1 == "bare" && $5 == 1')

set multiplot layout 1,2 title \
  sprintf("Loading with %d threads, against the cost of one getobs (a sleep, as in I/O-bound loading)", P) \
  font ',13'
set logscale x 10
set xrange [7:14000]
set xtics ('10 µs' 10, '100 µs' 100, '1 ms' 1000, '10 ms' 10000)
set xlabel 'time getobs asks to sleep, per observation'

set logscale y 10
set yrange [50:1e6]
set ylabel 'observations per second (log scale)'
set format y '%.0s%c'
set title 'Throughput'
set key at screen 0.03, screen 0.17 left Left reverse maxrows 3 \
  width -2 font ',9' spacing 1.1
plot \
  thr using 4:(rate($6, $10)) with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr title 'eachobs, consumer helps (THREADED)', \
  bg using 4:(rate($6, $10)) with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg title 'eachobs, background workers only (BACKGROUND)', \
  hand using 4:(rate($6, $10)) with linespoints pt 9 ps 1.4 lw 2 \
      lc rgb c_pool title 'hand-written pthread pool (mutex + condition variables)', \
  tbb using 4:(rate($6, $10)) with linespoints pt 11 ps 1.4 lw 2 \
      lc rgb c_tbb title 'oneTBB parallel_pipeline', \
  bare using 4:(rate($6, $14)) with lines dt 2 lw 2 lc rgb c_ref \
      title sprintf('the most possible: %d plain threads calling getobs, no hand-off', P), \
  one using 4:(rate($6, $10)) with lines dt 3 lw 2 lc rgb c_ref \
      title 'one thread calling getobs, no loader'

# The share of the bare threads' rate, which the log scale hides.
unset logscale y
set format y '%.1f'
set yrange [0:*]
set ylabel sprintf('throughput / that of %d plain threads', P)
set title 'The same, as a share of the most possible (1 = as fast as plain threads)'
unset key
set label 1 note at screen 0.5, screen 0.03 center font ',9'
reps = int(system("awk -F, 'NR == 2 { print $9 }' ".f))
set label 2 sprintf("Median of %d runs. A sleep asked for 10 µs takes %.0f µs here (timer slack and wake-up). THREADED can pass 1: the training thread loads too.", reps, t10) \
  at screen 0.5, screen 0.065 center font ',9'
plot \
  1 with lines dt 2 lw 2 lc rgb c_ref, \
  thr using 4:($14 / $10) with linespoints pt 7 ps 1.2 lw 2 lc rgb c_thr, \
  bg using 4:($14 / $10) with linespoints pt 5 ps 1.2 lw 2 lc rgb c_bg, \
  hand using 4:($14 / $10) with linespoints pt 9 ps 1.4 lw 2 lc rgb c_pool, \
  tbb using 4:($14 / $10) with linespoints pt 11 ps 1.4 lw 2 lc rgb c_tbb
unset multiplot
