# Efficiency against threads (tools/plots.sh threads; bench/timedataset
# --csv): a getobs that sleeps 1 ms (I/O-bound) and one that computes for
# 1 ms of its thread's CPU time (CPU-bound), 1 to 64 threads, unordered.
name = 'threads'
load 'bench/plots/common.gp'
fs = dir.'/plots-threads-sleep.csv'
fc = dir.'/plots-threads-cpu.csv'
cores = int(system('nproc'))
reps = int(system("awk -F, 'NR == 2 { print $7 }' ".fs))

# What one getobs took on one thread alone, for each panel's title.
stats fs using 3 nooutput
ts_sleep = STATS_max / 1e6
n = int(system("awk -F, 'NR == 2 { print $1 }' ".fs))

ex(e) = sprintf('$5 == "%s"', e)

set multiplot layout 1,2 title \
  sprintf("Efficiency against the number of threads (n = %d observations, in any order)", n) \
  font ',13'
set logscale x 2
set xrange [0.8:80]
set xtics (1, 2, 4, 8, 16, 32, 64)
set xlabel 'threads (nthreads)'
set ylabel 'efficiency = ceil(n / threads) x one getobs / wall time'
set format y '%.1f'
set yrange [0:2.1]
set ytics 0.2

set title sprintf("getobs sleeps 1 ms (I/O-bound; %.2f ms measured)", ts_sleep)
set key at screen 0.03, screen 0.175 left Left reverse maxrows 3 \
  width -2 font ',9' spacing 1.1
plot \
  1 with lines dt 2 lw 1 lc rgb c_ref notitle, \
  sel(fs, ex('threaded')) using 4:12 with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr title 'eachobs, consumer helps (THREADED; up to (threads + 1) / threads)', \
  sel(fs, ex('background')) using 4:12 with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg title 'eachobs, background workers only (BACKGROUND)', \
  sel(fs, ex('bare-thr')) using 4:12 with linespoints pt 9 ps 1.4 lw 2 \
      dt 3 lc rgb c_ref title 'plain threads calling getobs, no hand-off (what the machine allows)'

set title "getobs computes for 1 ms of CPU time (CPU-bound)"
set label 4 sprintf("This machine has %d cores: CPU-bound\nwork scales only to %d threads.\nBeyond, efficiency can be at most %d / threads.", cores, cores, cores) \
  at graph 0.97, graph 0.93 right font ',10' tc rgb '#333333'
set key at screen 0.55, screen 0.175 left Left reverse maxrows 3 \
  width -2 font ',9' spacing 1.1
set label 1 note at screen 0.5, screen 0.03 center font ',9'
set label 2 sprintf("Median of %d runs each, from before the iterator starts to after it is closed (thread creation included). THREADED passes 1 because the training thread loads too.\nCPU-bound: a spin counts only while its thread runs, so cores that other programs take show as lost efficiency.", reps) \
  at screen 0.5, screen 0.08 center font ',9'
most(p) = p <= cores ? 1 : real(cores) / p
set samples 200
plot \
  most(x) with lines dt 2 lw 2 lc rgb c_ref \
      title sprintf('the most %d cores allow: min(1, %d / threads)', cores, cores), \
  sel(fc, ex('threaded')) using 4:12 with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr notitle, \
  sel(fc, ex('background')) using 4:12 with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg notitle, \
  sel(fc, ex('bare-thr')) using 4:12 with linespoints pt 9 ps 1.4 lw 2 \
      dt 3 lc rgb c_ref notitle
unset multiplot
