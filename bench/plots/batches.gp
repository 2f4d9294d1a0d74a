# Batches filled in place against single observations, by observation
# size (tools/plots.sh batches; bench/batches --csv). getobs fills its
# observation with memset, the cheapest load there is, on 2 threads.
name = 'batches'
load 'bench/plots/common.gp'
f = dir.'/plots-batches.csv'

stats f using 3 nooutput
P = int(STATS_max)

set multiplot layout 1,2 title \
  sprintf("Batches of 64 filled in place against one observation at a time, by observation size (%d threads, getobs = memset)", P) \
  font ',13'
set logscale x 2
set xrange [40:1000000]
set xtics ('64 B' 64, '1 KiB' 1024, '4 KiB' 4096, '64 KiB' 65536, \
  '602 KiB' 602112)
set xlabel 'bytes of one observation (602 KiB: a 224 x 224 x 3 image of floats)'
set logscale y 10
set format y '%.0s%c'

set title 'Observations per second'
set ylabel 'observations per second (log scale)'
set key at screen 0.03, screen 0.175 left Left reverse maxrows 3 \
  width -2 font ',9' spacing 1.1
plot \
  f using 2:($6 * 1e6) every ::1 with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr title 'batches of 64, each observation loaded into its place (eachobs_next_batch)', \
  f using 2:($9 * 1e6) every ::1 with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg title 'one observation at a time, read in place (eachobs_next)', \
  f using 2:($7 * 1e6) every ::1 with linespoints pt 9 ps 1.4 lw 2 \
      lc rgb c_pool title 'one at a time, then copied into a batch by the training loop (as a collate step does)'

set title 'The same in bytes per second'
set ylabel 'GB/s loaded (log scale)'
set format y '%g'
unset key
set label 1 note at screen 0.5, screen 0.03 center font ',9'
set label 2 sprintf("Median of %d runs of 0.26-1.9 GB each; the training loop reads one byte of each observation. From 64 KiB up, memory decides: single observations cycle through 19 slots\n(1.2 MiB at 64 KiB, 11 MiB at 602 KiB) that stay in cache; 7 batches (28 MiB, 257 MiB) do not, and a new iterator's batches are fresh memory, slow to touch first on this VM.", int(system("awk -F, 'NR == 2 { print $5 }' ".f))) \
  at screen 0.5, screen 0.085 center font ',9'
plot \
  f using 2:($6 * $2 / 1e3) every ::1 with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr, \
  f using 2:($9 * $2 / 1e3) every ::1 with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg, \
  f using 2:($7 * $2 / 1e3) every ::1 with linespoints pt 9 ps 1.4 lw 2 \
      lc rgb c_pool
unset multiplot
