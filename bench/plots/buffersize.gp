# Memory and throughput against buffersize (tools/plots.sh buffersize;
# bench/buffersize --csv): getobs sleeps, then writes an image-sized
# observation; every run in a fresh process.
name = 'buffersize'
load 'bench/plots/common.gp'
f = dir.'/plots-buffersize.csv'

# The run's parameters and the library's default, from the CSV.
stats f using 3 nooutput
P = int(STATS_max)
stats f using 6 nooutput
t_us = STATS_max / 1e3
stats f using 5 nooutput
kib = STATS_max / 1024
stats sel(f, '$2 == 1') using 1 nooutput
def = int(STATS_max)
reps = int(system("awk -F, 'NR == 2 { print $8 }' ".f))

set multiplot layout 1,2 title \
  sprintf("buffersize: what it buys and what it costs (%d threads; getobs sleeps %.0f ms, then writes a %.0f KiB image)", P, t_us / 1e3, kib) \
  font ',13'
set logscale x 2
set xrange [0.7:1500]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
set xlabel 'buffersize (observations that may wait for the training loop)'
set arrow 1 from def, graph 0 to def, graph 1 nohead dt 4 lc rgb c_ref
set label 3 sprintf(' the default here: %d', def) at def, graph 0.05 left \
  font ',9' tc rgb '#555555'

set title 'Throughput'
set ylabel 'observations per second'
set yrange [0:*]
set format y '%.0s%c'
set key at screen 0.03, screen 0.175 left Left reverse maxrows 2 \
  width -2 font ',9' spacing 1.1
plot \
  sel(f, '$4 == 0') using 1:10 with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_thr title 'in any order (the default)', \
  sel(f, '$4 == 1') using 1:10 with linespoints pt 5 ps 1.2 lw 2 \
      lc rgb c_bg title 'in index order (ordered = true)'

set title 'Memory'
set ylabel 'MiB (log scale)'
set logscale y 2
set yrange [*:*]
set format y '%g'
set label 3 sprintf(' the default here: %d', def) at def, graph 0.9 left
set key at screen 0.53, screen 0.175 left Left reverse maxrows 2 \
  width -2 font ',9' spacing 1.1
set label 1 note at screen 0.5, screen 0.03 center font ',9'
set label 2 sprintf("Median of %d runs, each in a fresh process loading for about a quarter second; the training loop reads one byte of each image. Memory is the same in either order.", reps) \
  at screen 0.5, screen 0.065 center font ',9'
plot \
  sel(f, '$4 == 0') using 1:($11 / 1024) with linespoints pt 7 ps 1.2 lw 2 \
      lc rgb c_alt title 'peak resident memory the iteration added (measured)', \
  sel(f, '$4 == 0') using 1:($12 / 1024) with lines dt 2 lw 2 \
      lc rgb c_ref title "(buffersize + threads + 1) slots of one image (the header's formula)"
unset multiplot
